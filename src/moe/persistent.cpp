// The persistent GEMM kernel's rules, spec, workspace and launch: see persistent.hpp.
#include "moe/persistent.hpp"

#include <fmt/format.h>

#include "kernels/common/persistent_plan.cuh"
#include "moe/block_fp8_spec.hpp"
#include "moe/reference.hpp"
#include "moetune/error.hpp"

namespace moetune::moe {
namespace pp = persistent_plan;

std::string persistent_unfit(const MoeShape& s) {
  return block_fp8_unfit(s, pp::shape_violation);
}

int persistent_stages(const MoeShape& s, int smem_per_block) {
  return pp::stages_for(s.N, smem_per_block);
}

bool persistent_applies(const MoeShape& s, std::int64_t M, const std::string& arch,
                        int block_size_m, int grid, int smem_per_block) {
  return M >= 1 && M <= kPersistentMaxTokens && arch == "sm_90a" &&
         block_size_m == pp::kBlockM && persistent_unfit(s).empty() &&
         persistent_stages(s, smem_per_block) > 0 &&
         pp::tables_fit(max_num_m_blocks(M, s.topk, s.E, pp::kBlockM), grid);
}

cuda::KernelSpec persistent_spec(const MoeShape& s, const std::string& arch, int stages) {
  return block_fp8_spec(s, pp::shape_violation, arch, "moe_gemms_persistent_sm90a.cuh",
                        "moetune::moe_gemms_persistent", "moe_gemms_persistent", stages);
}

int persistent_counter_ints(const MoeShape& s, std::int64_t max_m_blocks) {
  return static_cast<int>(pp::counter_ints(max_m_blocks, s.N));
}

std::size_t persistent_workspace_bytes(const MoeShape& s, std::int64_t max_m_blocks, int grid) {
  return static_cast<std::size_t>(pp::workspace_bytes(max_m_blocks, s.N, grid));
}

void launch_persistent(const MoeShape& s, const std::string& arch, int stages, int grid,
                       const PersistentArgs& a, CUstream stream, bool pdl) {
  if (grid < 1) throw InputError("grid", std::to_string(grid), "must be at least 1");
  if (stages < 3 || stages > pp::kMaxStages)
    throw InputError("stages", std::to_string(stages), "must be in 3..6");
  // A device with fewer SMs than the GpuSpec the layer was planned for (a MIG slice under the
  // full GPU's name) gives each block more m-blocks than its tables hold.
  if (!pp::tables_fit(a.max_m_blocks, grid))
    throw InputError("grid", std::to_string(grid),
                     fmt::format("too few SMs for the persistent GEMM kernel at M={} ({} m-blocks); "
                                 "run the layer without it",
                                 a.M, a.max_m_blocks));
  const unsigned char* a_q = a.a_q;
  const float* a_scale = a.a_scale;
  const void* w13 = a.w13;
  const float* w13_scale = a.w13_scale;
  const void* w2 = a.w2;
  const float* w2_scale = a.w2_scale;
  unsigned char* act_q = a.act_q;
  float* act_scale = a.act_scale;
  void* y = a.y;
  const float* topk_weights = a.topk_weights;
  const std::int32_t* sorted = a.sorted_token_ids;
  const std::int32_t* expert_ids = a.expert_ids;
  const std::int32_t* ntpp = a.num_tokens_post_padded;
  long long M = a.M;
  long long max_m_blocks = a.max_m_blocks;
  void* ws = a.workspace;
  long long* trace = a.trace;
  void* args[] = {&a_q,  &a_scale,      &w13,    &w13_scale,  &w2,   &w2_scale,
                  &act_q, &act_scale,   &y,      &topk_weights, &sorted, &expert_ids,
                  &ntpp, &M,            &max_m_blocks, &ws,   &trace};
  cuda::LaunchOptions lo;
  lo.pdl = pdl;
  cuda::Jit::instance()
      .get(persistent_spec(s, arch, stages))
      ->launch(cuda::Dim3{static_cast<unsigned>(grid), 1, 1},
               cuda::Dim3{static_cast<unsigned>(pp::kThreads), 1, 1},
               static_cast<std::size_t>(pp::smem_bytes(stages, s.N)), stream, args, lo);
}

}  // namespace moetune::moe
