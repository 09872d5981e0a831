// quant_fp8_group: dynamic fp8 e4m3 quantization of activations, per token per GROUP columns
// (fp8 block-wise: GROUP = block_k = 128) or per tensor (GROUP = 0).
//
// Math: GROUP > 0: for each row r and group g: scale[r, g] = max(max_{i in g} |x[r, i]|, 1e-10)
//   / 448, q[r, i] = e4m3_satfinite(x[r, i] / scale[r, g]) (round to nearest even);
// GROUP = 0: amax = max_b amax_partials[b] (quant_fp8_amax's output), scale[0] = max(amax, 1e-10)
//   / 448, q[i] = e4m3_satfinite(x[i] / scale[0]).
// Matches src/moe/reference.cpp quant_fp8_group_reference / quant_fp8_tensor_reference.
//
// Pointers: x [rows, cols] bf16/fp16 (ACT; hidden for GEMM1, the activation for GEMM2);
// q [rows, cols] e4m3 bytes; scale: GROUP > 0 [rows, cols / GROUP] fp32, GROUP = 0 [1] fp32 (block
// 0 writes it); amax_partials [num_partials] fp32 (GROUP = 0 only).
// Grid: GROUP > 0: one warp per (row, group), THREADS/32 groups per block, grid-stride;
//       GROUP = 0: grid-stride over eight-element vectors, every block rederives the scale.
#pragma once
#include <cuda_fp8.h>

#include "common/act.cuh"
#include "common/pdl.cuh"

namespace moetune {

// The block-wise (GROUP > 0) quantization of rows [0, rows) by one block of a grid of `blocks`
// (warp w of block b takes (row, group) items b * THREADS/32 + w, then strides by the grid's
// warps): the quant_fp8_group kernel, and the routing kernels whose spare blocks quantize the
// hidden states while one warp per token routes (kernels/routing.cuh).
template <int ACT, int GROUP, int THREADS>
__device__ __forceinline__ void quant_fp8_group_rows(const void* __restrict__ x,
                                                     unsigned char* __restrict__ q,
                                                     float* __restrict__ scale, long long rows,
                                                     int cols, long long block, long long blocks) {
  static_assert(GROUP % 256 == 0 || GROUP == 128 || GROUP == 64,
                "GROUP must be 64, 128 or a multiple of 256");
  static_assert(THREADS % 32 == 0, "THREADS must be a multiple of 32");
  constexpr float kFp8Max = 448.0f;
  const unsigned char* xb = static_cast<const unsigned char*>(x);
  constexpr int kPerLane = GROUP / 32;  // 2, 4, 8, ... elements per lane
  static_assert(kPerLane == 2 || kPerLane == 4 || kPerLane % 8 == 0, "GROUP / 32");
  constexpr int kVec = kPerLane < 8 ? kPerLane : 8;
  const int lane = threadIdx.x % 32;
  const long long groups_per_row = cols / GROUP;
  const long long total = rows * groups_per_row;
  for (long long gi = static_cast<long long>(block) * (THREADS / 32) + threadIdx.x / 32;
       gi < total; gi += static_cast<long long>(blocks) * (THREADS / 32)) {
    const long long r = gi / groups_per_row;
    const long long base = r * cols + (gi % groups_per_row) * GROUP;  // element index
    float f[kPerLane];
#pragma unroll
    for (int c = 0; c < kPerLane; c += kVec) {
      const long long idx = base + static_cast<long long>(lane) * kPerLane + c;
      if constexpr (kVec == 8) {
        float v[8];
        act::load8<ACT>(xb + idx * 2, v);
#pragma unroll
        for (int i = 0; i < 8; ++i) f[c + i] = v[i];
      } else {
#pragma unroll
        for (int i = 0; i < kVec; ++i) {
          const unsigned short bits = reinterpret_cast<const unsigned short*>(xb)[idx + i];
          if constexpr (ACT == tile_math::kDtypeFp16) {
            f[c + i] = __half2float(__ushort_as_half(bits));
          } else {
            f[c + i] = __bfloat162float(__ushort_as_bfloat16(bits));
          }
        }
      }
    }
    float m = 0.0f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) m = fmaxf(m, fabsf(f[i]));
    m = act::warp_amax(m);
    const float s = fmaxf(m, 1e-10f) / kFp8Max;
    unsigned char out[kPerLane];
#pragma unroll
    for (int i = 0; i < kPerLane; ++i)
      out[i] = __nv_cvt_float_to_fp8(f[i] / s, __NV_SATFINITE, __NV_E4M3);
    unsigned char* qp = q + base + static_cast<long long>(lane) * kPerLane;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) qp[i] = out[i];
    if (lane == 0) scale[gi] = s;
  }
}

template <int ACT,      // tile_math::kDtypeBf16 / kDtypeFp16: the element type of x
          int GROUP,    // columns per scale (a multiple of 256 / 8... see static_assert); 0: per tensor
          int THREADS>  // threads per block
__global__ void __launch_bounds__(THREADS)
    quant_fp8_group(const void* __restrict__ x, unsigned char* __restrict__ q,
                    float* __restrict__ scale, const float* __restrict__ amax_partials,
                    int num_partials, long long rows, int cols) {
  static_assert(GROUP == 0 || GROUP % 256 == 0 || GROUP == 128 || GROUP == 64,
                "GROUP must be 0 (per tensor), 64, 128 or a multiple of 256");
  static_assert(THREADS % 32 == 0, "THREADS must be a multiple of 32");
  constexpr float kFp8Max = 448.0f;
  // PDL (common/pdl.cuh): x and amax_partials come from the kernels before: wait before any
  // global access.
  // Nothing below needs the SMs to itself: the next stage may be scheduled at once.
  pdl_wait();
  pdl_launch_dependents();
  const unsigned char* xb = static_cast<const unsigned char*>(x);
  if constexpr (GROUP > 0) {
    quant_fp8_group_rows<ACT, GROUP, THREADS>(x, q, scale, rows, cols, blockIdx.x, gridDim.x);
  } else {
    float m = 0.0f;
    for (int i = threadIdx.x; i < num_partials; i += THREADS) m = fmaxf(m, amax_partials[i]);
    m = act::block_max<THREADS>(m);
    const float s = fmaxf(m, 1e-10f) / kFp8Max;
    if (blockIdx.x == 0 && threadIdx.x == 0) scale[0] = s;
    const long long vecs = rows * cols / 8;
    for (long long v = static_cast<long long>(blockIdx.x) * THREADS + threadIdx.x; v < vecs;
         v += static_cast<long long>(gridDim.x) * THREADS) {
      float f[8];
      act::load8<ACT>(xb + v * 16, f);
      unsigned lo = 0, hi = 0;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        lo |= static_cast<unsigned>(__nv_cvt_float_to_fp8(f[i] / s, __NV_SATFINITE, __NV_E4M3))
              << (8 * i);
        hi |= static_cast<unsigned>(
                  __nv_cvt_float_to_fp8(f[4 + i] / s, __NV_SATFINITE, __NV_E4M3))
              << (8 * i);
      }
      *reinterpret_cast<uint2*>(q + v * 8) = make_uint2(lo, hi);
    }
  }
}

}  // namespace moetune
