// The sliced GEMM kernel's rules, spec, counters and launch: see sliced.hpp.
#include "moe/sliced.hpp"

#include <fmt/format.h>

#include "kernels/common/sliced_balance.cuh"
#include "kernels/common/sliced_plan.cuh"
#include "kernels/common/tile_math.cuh"
#include "moe/block_fp8_spec.hpp"
#include "moe/reference.hpp"
#include "moetune/error.hpp"

namespace moetune::moe {
namespace sp = sliced_plan;

std::string sliced_unfit(const MoeShape& s) { return block_fp8_unfit(s, sp::shape_violation); }

int sliced_stages(int smem_per_block, int want, bool balanced) {
  return balanced ? sliced_balance::stages_for(want, smem_per_block)
                  : sp::stages_for(want, smem_per_block);
}

std::string sliced_stages_violation(int stages) {
  if (stages >= sp::kMinStages && stages <= sp::kMaxStages) return "";
  return fmt::format("the sliced kernel's ring slots: {}..{}", sp::kMinStages, sp::kMaxStages);
}

bool sliced_applies(const MoeShape& s, std::int64_t M, const std::string& arch, int block_size_m,
                    int stages) {
  return M >= 1 && M <= kSlicedMaxTokens && arch == "sm_90a" && block_size_m == sp::kBlockM &&
         stages >= sp::kMinStages && sliced_unfit(s).empty();
}

bool sliced_derives_alignment(const MoeShape& s, std::int64_t M) {
  return M >= 1 && M * s.topk <= tile_math::kInlineAlignMaxSlots &&
         s.E <= tile_math::kInlineAlignMaxE;
}

cuda::KernelSpec sliced_spec(const MoeShape& s, const std::string& arch, int stages,
                             bool derive_alignment) {
  return block_fp8_spec(s, sp::shape_violation, arch, "moe_gemms_sliced_sm90a.cuh",
                        "moetune::moe_gemms_sliced", "moe_gemms_sliced", stages,
                        {{"ALIGN_E", std::to_string(derive_alignment ? s.E : 0)}},
                        derive_alignment ? fmt::format("_ia{}", s.E) : std::string());
}

cuda::KernelSpec sliced_balanced_spec(const MoeShape& s, const std::string& arch, int stages) {
  return block_fp8_spec(s, sp::shape_violation, arch, "moe_gemms_sliced_balanced_sm90a.cuh",
                        "moetune::moe_gemms_sliced_balanced", "moe_gemms_sliced_balanced", stages,
                        {{"ALIGN_E", std::to_string(s.E)}});
}

int sliced_balanced_max_slices(int grid) { return sliced_balance::max_slices_for(grid); }

bool sliced_balanced_applies(const MoeShape& s, std::int64_t M, int grid) {
  return grid >= 1 && sliced_derives_alignment(s, M) &&
         max_num_m_blocks(M, s.topk, s.E, sp::kBlockM) * sp::slices(s.N) <=
             sliced_balanced_max_slices(grid);
}

int sliced_balanced_counter_ints(int max_slices) {
  return sliced_balance::counter_ints(max_slices);
}

std::size_t sliced_balanced_exchange_bytes(int grid, int max_slices) {
  return static_cast<std::size_t>(sliced_balance::exchange_bytes(grid, max_slices));
}

int sliced_counter_ints() { return sp::kCounterInts; }

void launch_sliced(const MoeShape& s, const std::string& arch, int stages, const SlicedArgs& a,
                   CUstream stream, bool pdl) {
  if (const std::string why = sliced_stages_violation(stages); !why.empty())
    throw InputError("stages", std::to_string(stages), why);
  if (a.out == nullptr) throw InputError("out", "null", "the sliced GEMM kernel adds into it");
  if (a.counters == nullptr && !a.out_zeroed)
    throw InputError("counters", "null", "the kernel's tickets (unless out_zeroed)");
  if (reinterpret_cast<std::uintptr_t>(a.out) % 16 != 0)
    throw InputError("out", fmt::format("{}", a.out), "must be 16-byte aligned (vector adds)");
  const std::int64_t slices = a.max_m_blocks * sp::slices(s.N);
  if (a.max_m_blocks < 1 || slices > 0x7fffffff)
    throw InputError("max_m_blocks", std::to_string(a.max_m_blocks), "out of range");
  const bool derive = a.topk_ids != nullptr;
  if (a.balanced) {
    if (a.grid < 1) throw InputError("grid", std::to_string(a.grid), "must be >= 1 (the SMs)");
    if (!derive) throw InputError("topk_ids", "null", "the balanced sliced kernel derives the alignment");
    if (a.max_slices < slices || a.max_slices > sliced_balanced_max_slices(a.grid))
      throw InputError("max_slices", std::to_string(a.max_slices),
                       fmt::format("must hold the call's {} slices and be at most {} on {} blocks",
                                   slices, sliced_balanced_max_slices(a.grid), a.grid));
    if (a.counters == nullptr)
      throw InputError("counters", "null", "the balanced kernel's arrivals and ready flags");
    if (a.exchange == nullptr || reinterpret_cast<std::uintptr_t>(a.exchange) % 16 != 0)
      throw InputError("exchange", fmt::format("{}", a.exchange),
                       "the partial sums and activations: non-null and 16-byte aligned");
  }
  const std::int64_t blocks = a.balanced ? a.grid : slices;
  if (derive && !sliced_derives_alignment(s, a.M))
    throw InputError("M", std::to_string(a.M),
                     fmt::format("the sliced kernel derives the alignment for M * topk <= {} and "
                                 "at most {} local experts only",
                                 tile_math::kInlineAlignMaxSlots, tile_math::kInlineAlignMaxE));
  if (a.topk_ids == nullptr && (a.sorted_token_ids == nullptr || a.expert_ids == nullptr ||
                                a.num_tokens_post_padded == nullptr))
    throw InputError("sorted_token_ids", "null", "the alignment's tables (or topk_ids) are needed");
  const unsigned char* a_q = a.a_q;
  const float* a_scale = a.a_scale;
  const void* w13 = a.w13;
  const float* w13_scale = a.w13_scale;
  const void* w2 = a.w2;
  const float* w2_scale = a.w2_scale;
  void* out = a.out;
  const float* topk_weights = a.topk_weights;
  const std::int32_t* sorted = a.sorted_token_ids;
  const std::int32_t* expert_ids = a.expert_ids;
  const std::int32_t* ntpp = a.num_tokens_post_padded;
  long long M = a.M;
  std::int32_t* counters = a.counters;
  const std::int32_t* topk_ids = a.topk_ids;
  int expert_start = a.expert_start;
  int out_zeroed = a.out_zeroed ? 1 : 0;
  cuda::LaunchOptions lo;
  lo.pdl = pdl;
  if (a.balanced) {
    int max_slices = a.max_slices;
    void* exchange = a.exchange;
    void* bargs[] = {&a_q, &a_scale,  &w13,      &w13_scale,    &w2,         &w2_scale,
                     &out, &topk_weights, &M,    &counters,     &topk_ids,   &expert_start,
                     &out_zeroed, &max_slices, &exchange};
    cuda::Jit::instance()
        .get(sliced_balanced_spec(s, arch, stages))
        ->launch(cuda::Dim3{static_cast<unsigned>(blocks), 1, 1},
                 cuda::Dim3{static_cast<unsigned>(sp::kThreads), 1, 1},
                 static_cast<std::size_t>(sliced_balance::smem_bytes(stages)), stream, bargs, lo);
    return;
  }
  void* args[] = {&a_q,  &a_scale,      &w13,    &w13_scale,  &w2,   &w2_scale, &out,
                  &topk_weights, &sorted, &expert_ids, &ntpp, &M,   &counters, &topk_ids,
                  &expert_start, &out_zeroed};
  cuda::Jit::instance()
      .get(sliced_spec(s, arch, stages, derive))
      ->launch(cuda::Dim3{static_cast<unsigned>(blocks), 1, 1},
               cuda::Dim3{static_cast<unsigned>(sp::kThreads), 1, 1},
               static_cast<std::size_t>(sp::smem_bytes(stages)), stream, args, lo);
}

}  // namespace moetune::moe
