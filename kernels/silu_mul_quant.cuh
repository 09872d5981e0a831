// silu_mul_quant_group: block fp8's activation stage in one kernel, SiLU(gate) · up and its
// per-token GROUP-column fp8 quantization (GEMM2's input). It was silu_mul then quant_fp8_group:
// one stage boundary (a grid drain and a dependent launch, 1-1.5 µs at decode on the H200:
// `moetune profile`) and the [num_slots, N] 16-bit round trip less.
//
// Math, bit-identical to silu_mul followed by quant_fp8_group: a[slot, n] = silu(h[slot, n]) ·
// h[slot, N + n] in fp32 (act::silu_mul), rounded once to ACT (the 16-bit value the two-kernel
// path stores), then scale[slot, g] = max(max_{n in g} |a|, 1e-10) / 448 and q[slot, n] =
// e4m3_satfinite(a / scale) (round to nearest even). Slots whose expert is not on this rank
// (topk_ids[slot] - expert_start outside [0, E)) get a = 0: q = 0, scale = 1e-10 / 448.
// Pointers: h [num_slots, 2N] ACT (GEMM1's output: gate columns 0..N-1, up N..2N-1);
// q [num_slots, N] e4m3 bytes; scale [num_slots, N / GROUP] fp32; topk_ids [num_slots] int32.
// Grid: one warp per (slot, group), THREADS/32 groups per block, grid-stride.
#pragma once
#include <cuda_fp8.h>

#include "common/act.cuh"
#include "common/pdl.cuh"

namespace moetune {

template <int ACT,      // tile_math::kDtypeBf16 / kDtypeFp16
          int N,        // per-rank expert intermediate size (GEMM2's reduction)
          int GROUP,    // columns per scale (block_k), a multiple of 64 dividing N
          int THREADS>  // threads per block
__global__ void __launch_bounds__(THREADS)
    silu_mul_quant_group(const void* __restrict__ h, unsigned char* __restrict__ q,
                         float* __restrict__ scale, const int* __restrict__ topk_ids,
                         long long num_slots, int expert_start, int E) {
  static_assert(GROUP % 64 == 0 && N % GROUP == 0, "GROUP: a multiple of 64 dividing N");
  static_assert(THREADS % 32 == 0, "THREADS must be a multiple of 32");
  constexpr int kPerLane = GROUP / 32;  // consecutive columns of one lane, an even count
  constexpr int kGroups = N / GROUP;
  constexpr float kFp8Max = 448.0f;
  // PDL (common/pdl.cuh): h is GEMM1's output: wait before any global access.
  // Nothing below needs the SMs to itself: the next stage may be scheduled at once.
  pdl_wait();
  pdl_launch_dependents();
  const int lane = threadIdx.x % 32;
  const long long total = num_slots * kGroups;
  for (long long gi = static_cast<long long>(blockIdx.x) * (THREADS / 32) + threadIdx.x / 32;
       gi < total; gi += static_cast<long long>(gridDim.x) * (THREADS / 32)) {
    const long long slot = gi / kGroups;
    const long long n0 = (gi % kGroups) * GROUP + static_cast<long long>(lane) * kPerLane;
    const int e = topk_ids[slot] - expert_start;
    float a[kPerLane];
    if (static_cast<unsigned>(e) < static_cast<unsigned>(E)) {
      const unsigned* gate = reinterpret_cast<const unsigned*>(
          static_cast<const unsigned char*>(h) + (slot * 2 * N + n0) * 2);
      const unsigned* up = gate + N / 2;  // N 16-bit columns further
#pragma unroll
      for (int i = 0; i < kPerLane / 2; ++i) {
        const unsigned gw = gate[i], uw = up[i];
        float2 g, u;
        if constexpr (ACT == tile_math::kDtypeFp16) {
          g = __half22float2(*reinterpret_cast<const __half2*>(&gw));
          u = __half22float2(*reinterpret_cast<const __half2*>(&uw));
          const __half2 r = __floats2half2_rn(act::silu_mul(g.x, u.x), act::silu_mul(g.y, u.y));
          const float2 rf = __half22float2(r);
          a[2 * i] = rf.x;
          a[2 * i + 1] = rf.y;
        } else {
          g = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&gw));
          u = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&uw));
          const __nv_bfloat162 r =
              __floats2bfloat162_rn(act::silu_mul(g.x, u.x), act::silu_mul(g.y, u.y));
          const float2 rf = __bfloat1622float2(r);
          a[2 * i] = rf.x;
          a[2 * i + 1] = rf.y;
        }
      }
    } else {
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) a[i] = 0.0f;
    }
    float m = 0.0f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) m = fmaxf(m, fabsf(a[i]));
    m = act::warp_amax(m);
    const float s = fmaxf(m, 1e-10f) / kFp8Max;
    unsigned char* qp = q + slot * N + n0;
#pragma unroll
    for (int i = 0; i < kPerLane; i += 2) {  // two bytes per store: n0 is even
      const unsigned short lo = __nv_cvt_float_to_fp8(a[i] / s, __NV_SATFINITE, __NV_E4M3);
      const unsigned short hi = __nv_cvt_float_to_fp8(a[i + 1] / s, __NV_SATFINITE, __NV_E4M3);
      *reinterpret_cast<unsigned short*>(qp + i) = static_cast<unsigned short>(lo | (hi << 8));
    }
    if (lane == 0) scale[gi] = s;
  }
}

}  // namespace moetune
