// Register-only mma.sync throughput kernel: the measured MMA ceiling (moetune_bench's
// measure_ceilings). No memory traffic inside the loop: each warp issues kChains independent
// mma.sync chains per iteration on operands held in registers, and writes one float per thread
// at the end so that nothing is optimised away.
//
// FLOPs per warp-level mma: bf16/fp16 m16n8k16 = 2*16*8*16 = 4096; fp8 e4m3 m16n8k32 = 8192
// (the host side computes it from the shape).
// Total FLOPs of a launch = blocks * (threads/32) * iterations * kChains * flops_per_mma.
//
// out: [blocks * threads] fp32, written once per thread (sum of its accumulators).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

namespace moetune {

template <class T>
struct MmaPeakShape;

template <>
struct MmaPeakShape<__nv_bfloat16> {
  static constexpr int kM = 16, kN = 8, kK = 16;  // mma.sync m16n8k16, bf16 in, fp32 accumulate
};

template <>
struct MmaPeakShape<__half> {
  static constexpr int kM = 16, kN = 8, kK = 16;  // mma.sync m16n8k16, fp16 in, fp32 accumulate
};

template <>
struct MmaPeakShape<__nv_fp8_e4m3> {
  static constexpr int kM = 16, kN = 8, kK = 32;  // mma.sync m16n8k32, e4m3 in (sm_89+)
};

// One warp-level MMA d += a * b on registers; a: 4 x b32, b: 2 x b32, d: 4 x f32.
template <class T>
__device__ __forceinline__ void mma_peak_step(float (&d)[4], const unsigned (&a)[4],
                                              const unsigned (&b)[2]);

template <>
__device__ __forceinline__ void mma_peak_step<__nv_bfloat16>(float (&d)[4], const unsigned (&a)[4],
                                                             const unsigned (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

template <>
__device__ __forceinline__ void mma_peak_step<__half>(float (&d)[4], const unsigned (&a)[4],
                                                      const unsigned (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

template <>
__device__ __forceinline__ void mma_peak_step<__nv_fp8_e4m3>(float (&d)[4], const unsigned (&a)[4],
                                                             const unsigned (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  __trap();  // fp8 mma.sync needs sm_89 or newer
#endif
}

// T: __nv_bfloat16, __half or __nv_fp8_e4m3. kChains: independent accumulator chains per warp
// (hides the MMA latency; 4..8 saturate the tensor cores). iterations: run-time loop count.
template <class T, int kChains>
__global__ void mma_peak(float* out, int iterations) {
  static_assert(kChains >= 1 && kChains <= 16, "kChains must be in [1, 16]");
  // Small non-zero operands (0x3c00-ish bit patterns) so the data path is not trivially zero.
  const unsigned seed = 0x3c003c00u ^ (threadIdx.x * 0x00010001u);
  unsigned a[4] = {seed, seed ^ 0x00100010u, seed ^ 0x00200020u, seed ^ 0x00300030u};
  unsigned b[2] = {seed ^ 0x00400040u, seed ^ 0x00500050u};
  float d[kChains][4];
#pragma unroll
  for (int c = 0; c < kChains; ++c) {
#pragma unroll
    for (int i = 0; i < 4; ++i) d[c][i] = 0.0f;
  }
  for (int it = 0; it < iterations; ++it) {
#pragma unroll
    for (int c = 0; c < kChains; ++c) mma_peak_step<T>(d[c], a, b);
  }
  float sum = 0.0f;
#pragma unroll
  for (int c = 0; c < kChains; ++c) sum += d[c][0] + d[c][1] + d[c][2] + d[c][3];
  out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

}  // namespace moetune
