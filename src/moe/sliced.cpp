// The sliced GEMM kernel's rules, spec, counters and launch: see sliced.hpp.
#include "moe/sliced.hpp"

#include <fmt/format.h>

#include "kernels/common/sliced_plan.cuh"
#include "kernels/common/tile_math.cuh"
#include "moe/block_fp8_spec.hpp"
#include "moetune/error.hpp"

namespace moetune::moe {
namespace sp = sliced_plan;

std::string sliced_unfit(const MoeShape& s) { return block_fp8_unfit(s, sp::shape_violation); }

int sliced_stages(int smem_per_block, int want) { return sp::stages_for(want, smem_per_block); }

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

bool sliced_pairs_fit(const MoeShape& s) { return sliced_unfit(s).empty() && sp::pairs(s.N); }

cuda::KernelSpec sliced_spec(const MoeShape& s, const std::string& arch, int stages,
                             bool derive_alignment, bool pairs) {
  if (pairs && sliced_unfit(s).empty() && !sp::pairs(s.N))
    throw InputError("N", std::to_string(s.N), "the sliced kernel's pairs take N = 256");
  return block_fp8_spec(s, sp::shape_violation, arch, "moe_gemms_sliced_sm90a.cuh",
                        "moetune::moe_gemms_sliced", "moe_gemms_sliced", stages,
                        {{"ALIGN_E", std::to_string(derive_alignment ? s.E : 0)},
                         {"PAIR", pairs ? "1" : "0"}},
                        (derive_alignment ? fmt::format("_ia{}", s.E) : std::string()) +
                            (pairs ? "_pair" : ""));
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
  const std::int64_t blocks = a.max_m_blocks * sp::slices(s.N);
  if (a.max_m_blocks < 1 || blocks > 0x7fffffff)
    throw InputError("max_m_blocks", std::to_string(a.max_m_blocks), "out of range");
  const bool derive = a.topk_ids != nullptr;
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
  void* args[] = {&a_q,  &a_scale,      &w13,    &w13_scale,  &w2,   &w2_scale, &out,
                  &topk_weights, &sorted, &expert_ids, &ntpp, &M,   &counters, &topk_ids,
                  &expert_start, &out_zeroed};
  cuda::LaunchOptions lo;
  lo.pdl = pdl;
  lo.cluster_x = a.pairs ? 2 : 1;  // the m-block's two slices (blocks 2b, 2b + 1)
  cuda::Jit::instance()
      .get(sliced_spec(s, arch, stages, derive, a.pairs))
      ->launch(cuda::Dim3{static_cast<unsigned>(blocks), 1, 1},
               cuda::Dim3{static_cast<unsigned>(sp::kThreads), 1, 1},
               static_cast<std::size_t>(sp::smem_bytes(stages)), stream, args, lo);
}

}  // namespace moetune::moe
