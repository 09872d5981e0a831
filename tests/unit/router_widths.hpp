// Router widths off the anchors, for the tests of route_token's layout (a lane holds experts
// kPer * lane + j): Qwen3.5 TP4's block fp8 GEMM shapes with the experts and routing of
//   1000 softmax top 8 (lanes past E on the 16-byte row loads; EP 2, rank 0: FusedMoe takes at
//        most 512 experts per rank),
//   384 sigmoid with a bias top 8 (Kimi-K2-like),
//   160 softmax in 8 groups, 3 kept, top 6 (a butterfly over a group's 4 lanes of 5),
//   72 sigmoid with a bias in 8 groups, 2 kept, top 4 (groups of 3 lanes: a scan in shared memory),
//   20 softmax top 4 and 8 softmax top 2 (one expert per lane).
// Used by tests/unit/test_moe_decode.cpp (NVRTC) and tests/gpu/test_moe_decode.cpp.
#pragma once
#include <vector>

#include "moe/check.hpp"

namespace moetune::test_support {

inline std::vector<MoeShape> off_anchor_router_widths() {
  struct Width {
    int E, topk, n_group, topk_group;
    const char* scoring;
    bool bias;
  };
  std::vector<MoeShape> out;
  const Width widths[] = {{1000, 8, 1, 1, "softmax", false}, {384, 8, 1, 1, "sigmoid", true},
                         {160, 6, 8, 3, "softmax", false},  {72, 4, 8, 2, "sigmoid", true},
                         {20, 4, 1, 1, "softmax", false},   {8, 2, 1, 1, "softmax", false}};
  for (const Width& w : widths) {
    MoeShape s = moe::with_dtype_variant(moe::anchor_check_shapes()[0].shape, "fp8_block");
    s.E_global = w.E;
    s.E = w.E <= 512 ? w.E : w.E / 2;
    s.topk = w.topk;
    s.routing.scoring = w.scoring;
    s.routing.n_group = w.n_group;
    s.routing.topk_group = w.topk_group;
    s.routing.correction_bias = w.bias;
    out.push_back(s);
  }
  return out;
}

}  // namespace moetune::test_support
