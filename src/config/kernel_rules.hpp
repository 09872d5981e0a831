// The kernel's own tile rules (kernels/common/tile_math.cuh) asked with a KernelConfig: shared
// by validation and by the default heuristic, which must only ever propose valid tiles.
#pragma once
#include "kernels/common/tile_math.cuh"
#include "moetune/config.hpp"

namespace moetune::config {

// Why moetune's GEMM kernel cannot run `c` for this target, or nullptr.
inline const char* kernel_rule_violation(const KernelConfig& c, const ValidationTarget& t) {
  const int bytes = weight_bytes(t.dtype);  // w8a8: activations are as wide as weights
  const bool block_scales = t.dtype == Dtype::fp8_w8a8 && t.block_shape.has_value();
  return tile_math::tile_rule_violation(c.BLOCK_SIZE_M, c.BLOCK_SIZE_N, c.BLOCK_SIZE_K,
                                        c.num_warps, c.num_stages, c.SPLIT_K, bytes, bytes,
                                        block_scales);
}

}  // namespace moetune::config
