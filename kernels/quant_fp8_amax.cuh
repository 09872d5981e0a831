// quant_fp8_amax: the first pass of per-tensor dynamic fp8 quantization: partial max |x|.
//
// Math: partials[b] = max |x[i]| over the i that block b visits (grid-stride over n elements,
// eight at a time); max_b partials[b] = max |x|. quant_fp8_group (GROUP 0) reduces the partials
// again, so no memset and no atomics are needed and the result is deterministic.
// Pointers: x [n] bf16/fp16 (ACT), n a multiple of 8 (the caller's rows are); partials
// [gridDim.x] fp32, written here. Grid: any number of blocks (the host uses <= 256).
#pragma once
#include "common/act.cuh"
#include "common/pdl.cuh"

namespace moetune {

template <int ACT,      // tile_math::kDtypeBf16 / kDtypeFp16: the element type of x
          int THREADS>  // threads per block
__global__ void __launch_bounds__(THREADS)
    quant_fp8_amax(const void* __restrict__ x, long long n, float* __restrict__ partials) {
  // PDL (common/pdl.cuh): x may be the kernel before's output: wait before any global access.
  // Nothing below needs the SMs to itself: the next stage may be scheduled at once.
  pdl_wait();
  pdl_launch_dependents();
  const unsigned char* xb = static_cast<const unsigned char*>(x);
  float m = 0.0f;
  const long long vecs = n / 8;
  for (long long v = static_cast<long long>(blockIdx.x) * THREADS + threadIdx.x; v < vecs;
       v += static_cast<long long>(gridDim.x) * THREADS) {
    float f[8];
    act::load8<ACT>(xb + v * 16, f);
#pragma unroll
    for (int i = 0; i < 8; ++i) m = fmaxf(m, fabsf(f[i]));
  }
  m = act::block_max<THREADS>(m);
  if (threadIdx.x == 0) partials[blockIdx.x] = m;
}

}  // namespace moetune
