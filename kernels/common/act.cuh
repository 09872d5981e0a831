// 16-bit activation elements (bf16 / fp16) as fp32, eight at a time (one 16-byte access), and
// the block/warp reductions the stage kernels share. Device code only; included under NVRTC.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common/tile_math.cuh"

namespace moetune {
namespace act {

// ACT: tile_math::kDtypeBf16 or tile_math::kDtypeFp16 (the activation dtype).
template <int ACT>
__device__ __forceinline__ void load8(const void* p, float (&v)[8]) {
  const uint4 raw = *reinterpret_cast<const uint4*>(p);
  const unsigned w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 f;
    if constexpr (ACT == tile_math::kDtypeFp16) {
      f = __half22float2(*reinterpret_cast<const __half2*>(&w[i]));
    } else {
      f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&w[i]));
    }
    v[2 * i] = f.x;
    v[2 * i + 1] = f.y;
  }
}

template <int ACT>
__device__ __forceinline__ void store8(void* p, const float (&v)[8]) {
  unsigned w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (ACT == tile_math::kDtypeFp16) {
      const __half2 h = __floats2half2_rn(v[2 * i], v[2 * i + 1]);
      w[i] = *reinterpret_cast<const unsigned*>(&h);
    } else {
      const __nv_bfloat162 h = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
      w[i] = *reinterpret_cast<const unsigned*>(&h);
    }
  }
  *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
}

// SiLU(gate) · up in fp32: silu(x) = x / (1 + exp(-x)). The silu_mul stage and GEMM1's fused
// epilogue (FUSED_ACT) share it, so both give the same bits for the same fp32 inputs.
__device__ __forceinline__ float silu_mul(float gate, float up) {
  return gate / (1.0f + expf(-gate)) * up;
}

// The same with the fast intrinsics (__expf, __fdividef: a few fp32 ulp, far below the bf16
// rounding that follows; silu(x) -> -0 for x below about -88, where 1 + exp(-x) overflows). For
// epilogues: the IEEE division's special-case branch and call cost the wgmma GEMM1's fused
// block-fp8 epilogue 5 µs of a 25 µs kernel on the H200 (Qwen3.5 TP4 M = 8; this fast form: none,
// bench/results/2026-12-01_h200_twelfth_session.md calls 13, 14).
__device__ __forceinline__ float silu_mul_fast(float gate, float up) {
  return __fdividef(gate, 1.0f + __expf(-gate)) * up;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// The max over the warp of v >= 0 that is never NaN (an amax from fmaxf(0, |x|...), which drops
// NaN): such floats order as their bits do, so one redux (sm_80+) gives warp_max's bits where
// warp_max takes five dependent shuffles. The fp8 quantizations' amax; on the decode kernels'
// path at M = 1..4 it took 2-3% of the layer (bench/results/2026-12-02_h200_twentieth_session.md).
__device__ __forceinline__ float warp_amax(float v) {
  return __uint_as_float(__reduce_max_sync(0xffffffffu, __float_as_uint(v)));
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// Max over the block (THREADS a multiple of 32, <= 1024); every thread gets the result.
template <int THREADS>
__device__ __forceinline__ float block_max(float v) {
  __shared__ float s_part[THREADS / 32];
  v = warp_max(v);
  if ((threadIdx.x & 31) == 0) s_part[threadIdx.x / 32] = v;
  __syncthreads();
  float r = threadIdx.x < THREADS / 32 ? s_part[threadIdx.x] : 0.0f;
  if (threadIdx.x < 32) r = warp_max(r);
  __shared__ float s_result;
  if (threadIdx.x == 0) s_result = r;
  __syncthreads();
  return s_result;
}

}  // namespace act
}  // namespace moetune
