// Host side of the persistent GEMM kernel (kernels/moe_gemms_persistent_sm90a.cuh): GEMM1 with
// SiLU(gate)·up and its quantization, and GEMM2, of a block-fp8 layer in one launch of one
// block per SM, for decode sizes on sm_90a. Which shapes and sizes it takes, its spec, its
// workspace and its launch. No sync, no allocation.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include <cuda.h>

#include "cuda/jit.hpp"
#include "moetune/model.hpp"

namespace moetune::moe {

// Tokens up to which FusedMoe runs the persistent kernel where it applies (persistent_applies).
// Above, the stage GEMMs' grids hold several waves and overlap their own tails.
inline constexpr std::int64_t kPersistentMaxTokens = 32;

// "" when the kernel can run `shape`: block fp8 with block_k 128 and block_n a multiple of 64,
// N a multiple of 128 up to 1024, K a multiple of 256 (persistent_plan::shape_violation);
// else why not.
std::string persistent_unfit(const MoeShape& shape);

// Ring slots the layer gives the kernel for `shape` within `smem_per_block` bytes of shared
// memory per block (opt-in): 4 (persistent_plan::kLayerStages, measured), 3 where 4 do not fit,
// 0 when fewer than 3 fit.
int persistent_stages(const MoeShape& shape, int smem_per_block);

// Whether a layer call of M tokens can take the kernel on `arch` with a grid of `grid` blocks
// (one per SM) and `smem_per_block` bytes per block, the alignment padding to `block_size_m`
// (the up config's BLOCK_SIZE_M: the kernel's m-blocks are 16 slots): the shape fits, arch is
// sm_90a (wgmma), 1 <= M <= kPersistentMaxTokens, at least 3 ring slots fit, and one block's
// m-block tables hold what the grid gives it (persistent_plan::tables_fit).
bool persistent_applies(const MoeShape& shape, std::int64_t M, const std::string& arch,
                        int block_size_m, int grid, int smem_per_block);

cuda::KernelSpec persistent_spec(const MoeShape& shape, const std::string& arch, int stages);

// Workspace bytes for up to max_m_blocks m-blocks and `grid` blocks: counters, then two fp32
// partial tiles (16 KB each) per block. The counters (the first persistent_counter_ints(...)
// int32) must be zero before the first launch; the kernel leaves them zero.
std::size_t persistent_workspace_bytes(const MoeShape& shape, std::int64_t max_m_blocks, int grid);
int persistent_counter_ints(const MoeShape& shape, std::int64_t max_m_blocks);

struct PersistentArgs {
  std::int64_t M = 0;
  std::int64_t max_m_blocks = 0;            // capacity of expert_ids (sizes the counters)
  const std::uint8_t* a_q = nullptr;        // [M, K] e4m3
  const float* a_scale = nullptr;           // [M, K/128]
  const void* w13 = nullptr;                // [E, 2N, K] e4m3
  const float* w13_scale = nullptr;         // [E, 2N/bn, K/128]
  const void* w2 = nullptr;                 // [E, K, N] e4m3
  const float* w2_scale = nullptr;          // [E, K/bn, N/128]
  std::uint8_t* act_q = nullptr;            // [M*topk, N] e4m3 (written)
  float* act_scale = nullptr;               // [M*topk, N/128] (written)
  void* y = nullptr;                        // [M*topk, K] bf16 (written: valid slots)
  const float* topk_weights = nullptr;      // [M, topk]
  const std::int32_t* sorted_token_ids = nullptr;  // alignment with BLOCK_SIZE_M 16
  const std::int32_t* expert_ids = nullptr;
  const std::int32_t* num_tokens_post_padded = nullptr;
  void* workspace = nullptr;                // persistent_workspace_bytes(shape, max_m_blocks, grid)
  // A probe's timeline (null in the layer): [grid][persistent_plan::kTraceStride] int64,
  // globaltimer ns at (0) the PDL wait passed, (1) the tables read, (2) the first unit in shared
  // memory, (3) GEMM1 done, (4) the first m-block ready for GEMM2, (5) the consumers done, (6)
  // the producer's last copy issued; (7) the block's GEMM1 units; then per unit (up to 64) when
  // its data was in, and when the producer began copying it.
  long long* trace = nullptr;
};
// One launch of `grid` blocks (at most the device's SMs: every block must be resident at once),
// a programmatic dependent launch when pdl. Throws InputError on a shape it cannot run.
void launch_persistent(const MoeShape& shape, const std::string& arch, int stages, int grid,
                       const PersistentArgs& a, CUstream stream, bool pdl);

}  // namespace moetune::moe
