// Tile arithmetic shared by the kernels (static_asserts) and the host validator: one formula
// for shared memory, no drift. constexpr only, no CUDA includes, so host C++ can include it.
#pragma once

namespace moetune {
namespace tile_math {

// Shared memory of one block of moetune's grouped GEMM (kernels/moe_gemm_mma.cuh):
// num_stages ring buffers, each holding an A tile [BLOCK_SIZE_M, BLOCK_SIZE_K] of activation
// elements and a B tile [BLOCK_SIZE_N, BLOCK_SIZE_K] of weight elements, plus for block fp8 the
// per-stage scales (BLOCK_SIZE_M activation scales, fp32), plus the row index table
// (BLOCK_SIZE_M token ids, int32). a_bytes/b_bytes: element sizes (2 bf16/fp16, 1 fp8).
constexpr int gemm_smem_bytes(int BLOCK_SIZE_M, int BLOCK_SIZE_N, int BLOCK_SIZE_K, int num_stages,
                              int a_bytes, int b_bytes, bool block_scales) {
  int stage = BLOCK_SIZE_M * BLOCK_SIZE_K * a_bytes + BLOCK_SIZE_N * BLOCK_SIZE_K * b_bytes;
  if (block_scales) stage += BLOCK_SIZE_M * 4;
  return num_stages * stage + BLOCK_SIZE_M * 4;
}

// The reference Triton kernel's estimate, reported beside ours: (stages-1)*(BM+BN)*BK*bytes.
constexpr int reference_smem_bytes(int BLOCK_SIZE_M, int BLOCK_SIZE_N, int BLOCK_SIZE_K,
                                   int num_stages, int bytes) {
  return (num_stages - 1) * (BLOCK_SIZE_M + BLOCK_SIZE_N) * BLOCK_SIZE_K * bytes;
}

constexpr int ceil_div(long long a, long long b) { return static_cast<int>((a + b - 1) / b); }

}  // namespace tile_math
}  // namespace moetune
