// Host side of the sliced GEMM kernel (kernels/moe_gemms_sliced_sm90a.cuh): GEMM1 with
// SiLU(gate)·up and its quantization, and GEMM2 with the top-k sum, of a block-fp8 layer in one
// launch, a block per (m-block, 128-column slice of the intermediate), for decode sizes on
// sm_90a. Which shapes and sizes it takes, its spec, its counters and its launch. No sync, no
// allocation.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include <cuda.h>

#include "cuda/jit.hpp"
#include "moetune/model.hpp"

namespace moetune::moe {

// Tokens up to which FusedMoe runs the sliced kernel where it is asked for (sliced_applies).
inline constexpr std::int64_t kSlicedMaxTokens = 64;
// Ring slots the layer asks for (fewer where the shared memory per block holds fewer). Layer on
// an H100 SXM against 2 and 3 slots (bench/results/2026-12-06_h100_thirtythird_session.md,
// call 3): Qwen3.5 fp8 TP4 M = 8 55.09 µs against 56.16 / 56.95; 3 slots lead at M = 32.
inline constexpr int kSlicedStages = 4;

// "" when the kernel can run `shape`: block fp8 with block_k 128 and block_n a multiple of 64,
// N a multiple of 128 up to 512, K a multiple of 256 (sliced_plan::shape_violation); else why
// not.
std::string sliced_unfit(const MoeShape& shape);

// Ring slots for `smem_per_block` bytes of shared memory per block (opt-in): `want` (by default
// kSlicedStages), or the most below it that fit (at least 2); 0 when none fit.
int sliced_stages(int smem_per_block, int want = kSlicedStages);
// "" for a ring depth the kernel takes (sliced_plan::kMinStages..kMaxStages: 2..5), else why not
// (the InputError text of launch_sliced, FusedMoeOptions::sliced_stages and --sliced-stages).
std::string sliced_stages_violation(int stages);

// Whether a layer call of M tokens can take the kernel on `arch`, the alignment padding to
// `block_size_m` (the up config's BLOCK_SIZE_M: the kernel's m-blocks are 16 slots): the shape
// fits, arch is sm_90a (wgmma), 1 <= M <= kSlicedMaxTokens, and a ring fits (stages > 0).
bool sliced_applies(const MoeShape& shape, std::int64_t M, const std::string& arch,
                    int block_size_m, int stages);

// Whether the kernel can derive the alignment itself at M (common/inline_align.cuh): M * topk
// <= tile_math::kInlineAlignMaxSlots and local experts <= kInlineAlignMaxE.
bool sliced_derives_alignment(const MoeShape& shape, std::int64_t M);

// Whether the kernel can run `shape` in pairs (N = 256: the m-block's two slices as a cluster of
// two blocks that swap activation halves; sliced_plan.cuh).
bool sliced_pairs_fit(const MoeShape& shape);

// derive_alignment: the instance that derives its m-block's expert and slots from topk_ids
// (SlicedArgs::topk_ids set) instead of reading the alignment's tables. pairs: the instance
// launched as clusters of two (InputError unless sliced_pairs_fit).
cuda::KernelSpec sliced_spec(const MoeShape& shape, const std::string& arch, int stages,
                             bool derive_alignment = false, bool pairs = false);

// int32 counters the kernel needs in the workspace without SlicedArgs::out_zeroed (zero before
// the first launch; the kernel leaves them zero, and FusedMoe's routing or alignment launch
// zeroes them once per call as well).
int sliced_counter_ints();

struct SlicedArgs {
  std::int64_t M = 0;
  std::int64_t max_m_blocks = 0;            // the alignment's m-blocks of 16 slots (the grid)
  const std::uint8_t* a_q = nullptr;        // [M, K] e4m3
  const float* a_scale = nullptr;           // [M, K/128]
  const void* w13 = nullptr;                // [E, 2N, K] e4m3
  const float* w13_scale = nullptr;         // [E, 2N/bn, K/128]
  const void* w2 = nullptr;                 // [E, K, N] e4m3
  const float* w2_scale = nullptr;          // [E, K/bn, N/128]
  void* out = nullptr;                      // [M, K] bf16: zeroed, then the layer's output
  const float* topk_weights = nullptr;      // [M, topk]
  const std::int32_t* sorted_token_ids = nullptr;  // alignment with BLOCK_SIZE_M 16
  const std::int32_t* expert_ids = nullptr;
  const std::int32_t* num_tokens_post_padded = nullptr;
  std::int32_t* counters = nullptr;         // sliced_counter_ints(), 4-byte aligned
  // Set: the kernel derives the alignment from these [M, topk] global expert ids (M * topk <=
  // tile_math::kInlineAlignMaxSlots) and ignores the three tables above; expert_start is the
  // rank's first expert (EP; 0 otherwise). The counters must then be zeroed by a launch before
  // (FusedMoe's routing launch), as no alignment launch runs.
  const std::int32_t* topk_ids = nullptr;
  int expert_start = 0;
  // Set: out is all zero on entry (a launch before zeroed it: FusedMoe's routing launch) and
  // the kernel uses no counters (no ticket on entry, no count on exit; counters may be null).
  // Unset: its first blocks zero out and the counters must be zero on entry (the kernel leaves
  // them zero).
  bool out_zeroed = false;
  // Set: the pairs instance (sliced_pairs_fit), launched as clusters of two blocks.
  bool pairs = false;
};
// One launch of max_m_blocks x N/128 blocks, a programmatic dependent launch when pdl. Throws
// InputError on a shape it cannot run or a missing pointer.
void launch_sliced(const MoeShape& shape, const std::string& arch, int stages,
                   const SlicedArgs& a, CUstream stream, bool pdl);

}  // namespace moetune::moe
