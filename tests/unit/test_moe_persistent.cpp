// The persistent GEMM kernel's host side and plan (no GPU): which shapes and sizes take it, how
// its work splits over the grid (every unit once, tables that fit), its shared memory and
// workspace, the layer's workspace with it, and (NVRTC) that it compiles without spills within
// the registers its 384 threads may have.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/common/persistent_plan.cuh"
#include "moe/check.hpp"
#include "moe/persistent.hpp"
#include "moe/reference.hpp"
#include "moetune/error.hpp"
#include "moetune/fused_moe.hpp"
#include "moetune/gpu_spec.hpp"
#include "nvrtc_test.hpp"

namespace moetune::moe {
namespace {
namespace pp = persistent_plan;

MoeShape anchor(int i, const char* dtype) {
  return with_dtype_variant(anchor_check_shapes()[i].shape, dtype);
}

TEST(MoePersistent, TakesBlockFp8ShapesItTiles) {
  EXPECT_EQ(persistent_unfit(anchor(0, "fp8_block")), "");
  EXPECT_EQ(persistent_unfit(anchor(1, "fp8_block")), "");
  EXPECT_NE(persistent_unfit(anchor(0, "bf16")), "");
  EXPECT_NE(persistent_unfit(anchor(0, "fp8_tensor")), "");
  EXPECT_NE(persistent_unfit(anchor(2, "fp8_block")).find("N must be at most 1024"),
            std::string::npos);  // Mixtral TP2: N = 7168
  MoeShape s = anchor(0, "fp8_block");
  s.block_shape = std::array<int, 2>{128, 64};
  EXPECT_NE(persistent_unfit(s).find("block_k"), std::string::npos);
  s = anchor(0, "fp8_block");
  s.N = 192;  // not a multiple of 128
  EXPECT_NE(persistent_unfit(s).find("N must"), std::string::npos);
  s = anchor(0, "fp8_block");
  s.K = 3200;  // a multiple of 128, not of 256
  EXPECT_NE(persistent_unfit(s).find("K must"), std::string::npos);
  EXPECT_THROW(persistent_spec(anchor(0, "bf16"), "sm_90a", 6), InputError);
}

TEST(MoePersistent, SharedMemoryAndStages) {
  // Up to six 34 KB slots and the rest fit an H200 block's 227 KB; the layer takes 4 (measured),
  // 3 where 4 do not fit; a 99 KB GPU gets none.
  EXPECT_EQ(pp::kStageBytes, 34816);
  EXPECT_LE(pp::smem_bytes(6, 256), 227 * 1024);
  EXPECT_GT(pp::smem_bytes(6, 256), 6 * pp::kStageBytes);
  EXPECT_EQ(persistent_stages(anchor(0, "fp8_block"), 227 * 1024), 4);
  EXPECT_EQ(persistent_stages(anchor(0, "fp8_block"), pp::smem_bytes(4, 256) - 1), 3);
  EXPECT_EQ(persistent_stages(anchor(0, "fp8_block"), 99 * 1024), 0);
  // N = 1024: 6 more activation tiles for GEMM2, the same 4 slots.
  MoeShape wide = anchor(0, "fp8_block");
  wide.N = 1024;
  EXPECT_EQ(persistent_unfit(wide), "");
  EXPECT_EQ(persistent_stages(wide, 227 * 1024), 4);
  EXPECT_EQ(pp::smem_bytes(6, 1024) - pp::smem_bytes(6, 256), 6 * pp::kATileBytes);
}

// Every block's GEMM1 units and GEMM2 items, over all blocks, cover each exactly once, and the
// m-blocks a block touches fit its tables wherever tables_fit says so.
TEST(MoePersistent, WorkSplitsOverTheGridOnce) {
  for (long long P : {1LL, 7LL, 132LL, 114LL})
    for (long long nmb : {1LL, 3LL, 8LL, 57LL, 64LL, 204LL, 256LL, 1000LL})
      for (int N : {256, 512})
        for (int K : {3072, 7168}) {
          const long long T1 = nmb * pp::up_tiles(N) * pp::up_units(K);
          const long long I2 = nmb * pp::down_items(K);
          long long next_u = 0, next_i = 0, widest = 0;
          for (long long c = 0; c < P; ++c) {
            const long long u0 = pp::range_begin(c, T1, P), u1 = pp::range_begin(c + 1, T1, P);
            const long long i0 = pp::range_begin(c, I2, P), i1 = pp::range_begin(c + 1, I2, P);
            ASSERT_EQ(u0, next_u);
            ASSERT_EQ(i0, next_i);
            next_u = u1;
            next_i = i1;
            long long lo = nmb, hi = -1;
            const long long per_b = pp::up_tiles(N) * pp::up_units(K);
            if (u1 > u0) lo = std::min(lo, u0 / per_b), hi = std::max(hi, (u1 - 1) / per_b);
            if (i1 > i0)
              lo = std::min(lo, i0 / pp::down_items(K)),
              hi = std::max(hi, (i1 - 1) / pp::down_items(K));
            widest = std::max(widest, hi - lo + 1);
          }
          EXPECT_EQ(next_u, T1);
          EXPECT_EQ(next_i, I2);
          if (pp::tables_fit(nmb, P)) {
            EXPECT_LE(widest, pp::kMaxMBlocks) << nmb << " " << P;
          }
        }
}

TEST(MoePersistent, AppliesAtDecodeSizesOnSm90a) {
  const MoeShape q = anchor(0, "fp8_block");
  const int smem = 227 * 1024;
  for (std::int64_t M : {1, 8, 16, 32})
    EXPECT_TRUE(persistent_applies(q, M, "sm_90a", 16, 132, smem)) << M;
  EXPECT_FALSE(persistent_applies(q, 0, "sm_90a", 16, 132, smem));
  EXPECT_FALSE(persistent_applies(q, kPersistentMaxTokens + 1, "sm_90a", 16, 132, smem));
  EXPECT_FALSE(persistent_applies(q, 8, "sm_90", 16, 132, smem));   // no wgmma
  EXPECT_FALSE(persistent_applies(q, 8, "sm_100a", 16, 132, smem));
  EXPECT_FALSE(persistent_applies(q, 8, "sm_90a", 64, 132, smem));  // another alignment
  EXPECT_FALSE(persistent_applies(q, 8, "sm_90a", 16, 132, 99 * 1024));
  // 256 m-blocks at M = 32 need 2 + 3 table rows per block on 132 SMs, 9 on 32.
  EXPECT_TRUE(persistent_applies(q, 32, "sm_90a", 16, 64, smem));
  EXPECT_FALSE(persistent_applies(q, 32, "sm_90a", 16, 32, smem));
  EXPECT_FALSE(persistent_applies(anchor(0, "bf16"), 8, "sm_90a", 16, 132, smem));
}

TEST(MoePersistent, LayerUsesItWhenAskedAndNotByDefault) {
  const GpuSpec& h200 = require_gpu("NVIDIA H200");
  const MoeShape q = anchor(0, "fp8_block");
  FusedMoeOptions o;
  o.persistent_gemms = true;
  FusedMoe on(q, h200, {}, {}, o), off(q, h200);
  for (std::int64_t M : {1, 8, 16, 32}) {
    EXPECT_TRUE(on.uses_persistent_gemms(M)) << M;
    EXPECT_FALSE(off.uses_persistent_gemms(M)) << M;
    const MoeWorkspaceLayout L = on.workspace_layout(M);
    EXPECT_TRUE(L.persistent) << M;
    EXPECT_EQ(L.persistent_ws_bytes,
              persistent_workspace_bytes(q, max_num_m_blocks(M, q.topk, q.E, 16), 132))
        << M;
    EXPECT_GE(L.total, L.persistent_ws + L.persistent_ws_bytes);
    EXPECT_EQ(off.workspace_layout(M).persistent_ws_bytes, 0u);
  }
  EXPECT_FALSE(on.uses_persistent_gemms(33));
  // The region stays (sized for 32 tokens) above: the workspace never shrinks as M grows.
  std::size_t prev = 0;
  for (std::int64_t M = 1; M <= 300; ++M) {
    const std::size_t t = on.workspace_bytes(M);
    EXPECT_GE(t, prev) << M;
    prev = t;
  }
  EXPECT_EQ(on.workspace_layout(64).persistent_ws_bytes,
            on.workspace_layout(32).persistent_ws_bytes);
  EXPECT_FALSE(on.workspace_layout(64).persistent);
  // An arch without wgmma never takes it.
  FusedMoeOptions a = o;
  a.arch = "sm_89";
  EXPECT_FALSE(FusedMoe(q, h200, {}, {}, a).uses_persistent_gemms(8));
}

// A grid too small for the m-blocks (a MIG slice under the full GPU's name) is refused before
// any launch, naming the grid.
TEST(MoePersistent, LaunchRefusesAGridTooSmallForItsTables) {
  PersistentArgs a;
  a.M = 16;
  a.max_m_blocks = 128;  // 16 SMs: 8 + 3 table rows a block
  try {
    launch_persistent(anchor(0, "fp8_block"), "sm_90a", 4, 16, a, nullptr, false);
    FAIL() << "no InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "grid");
    EXPECT_EQ(e.value(), "16");
  }
  EXPECT_THROW(launch_persistent(anchor(0, "fp8_block"), "sm_90a", 7, 132, a, nullptr, false),
               InputError);
}

class PersistentNvrtc : public test_support::NvrtcTest {};

// 384 threads at one block per SM: at most 170 registers each (65536 / 384), no spills, on both
// fp8 anchors (the kernel declares __launch_bounds__(384, 1); ptxas would spill rather than
// exceed it, so the spill count is the test).
TEST_F(PersistentNvrtc, CompilesWithoutSpillsOnTheAnchors) {
  test_support::ScratchJit jit("persistent-nvrtc");
  for (int i : {0, 1})
    test_support::expect_compiles_without_spills(
        jit, persistent_spec(anchor(i, "fp8_block"), "sm_90a", 4), 168);
}

}  // namespace
}  // namespace moetune::moe
