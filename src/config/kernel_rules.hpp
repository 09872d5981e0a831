// The kernel's own tile rules (kernels/common/tile_math.cuh) asked with a KernelConfig: shared
// by validation and by the default heuristic, which must only ever propose valid tiles.
#pragma once
#include "kernels/common/tile_math.cuh"
#include "moetune/config.hpp"

namespace moetune::config {

// Why moetune's GEMM kernel cannot run `c` for this target, or nullptr. SWAP_AB = 1 runs on
// wgmma (sm_90a only); 16-bit GEMM1 fuses SiLU(gate)*up at decode, so 16-bit swap-AB tiles
// must pair gate and up slices in both tables (one rule for up and down: validation does not
// know which GEMM a batch size's GEMM1 stage is). Block fp8 needs one weight scale per m64
// slice (block_n a multiple of 64).
inline const char* kernel_rule_violation(const KernelConfig& c, const ValidationTarget& t) {
  const int bytes = weight_bytes(t.dtype);  // w8a8: activations are as wide as weights
  const bool block_scales = t.dtype == Dtype::fp8_w8a8 && t.block_shape.has_value();
  if (const char* why = tile_math::tile_rule_violation(
          c.BLOCK_SIZE_M, c.BLOCK_SIZE_N, c.BLOCK_SIZE_K, c.num_warps, c.num_stages, c.SPLIT_K,
          bytes, bytes, block_scales))
    return why;
  if (c.SWAP_AB != 1) return nullptr;
  if (t.gpu == nullptr || t.gpu->arch() != "sm_90a")
    return "SWAP_AB=1 runs on Hopper's wgmma: sm_90a only";
  if (block_scales && (*t.block_shape)[0] % 64 != 0)
    return "SWAP_AB=1 with block fp8 needs block_n a multiple of 64 (one scale per m64 slice)";
  return tile_math::gemm_swapab_violation(c.BLOCK_SIZE_M, c.BLOCK_SIZE_N, c.BLOCK_SIZE_K,
                                          c.num_warps, bytes, block_scales, bytes == 2);
}

}  // namespace moetune::config
