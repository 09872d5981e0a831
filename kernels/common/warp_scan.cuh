// Inclusive prefix sum of `v` over a warp's lanes (lane i gets the sum of lanes 0..i), by
// Kogge-Stone shuffles: every lane of the warp must call it (full mask). Used by the
// alignment's padded scan (kernels/moe_align.cuh) and GEMM1's own (common/inline_align.cuh).
#pragma once

namespace moetune {

__device__ __forceinline__ int warp_inclusive_sum(int v, int lane) {
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const int u = __shfl_up_sync(0xffffffffu, v, off);
    if (lane >= off) v += u;
  }
  return v;
}

}  // namespace moetune
