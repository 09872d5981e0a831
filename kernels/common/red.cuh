// Atomic adds of 16-bit floats into global memory (PTX `red`: no value returned, so a warp never
// waits for them), for GEMM2's folded top-k sum (tile_math::kStageDown with SUM_TOPK). Each add
// rounds to the element type (bf16 or fp16, round to nearest even, no flush of subnormals:
// .noftz); adds to one address from different blocks land in any order, so a sum of several
// is not bit-reproducible from run to run. sm_90+ (the vector and bf16 forms); the host never
// asks for them below (fused_moe's gemm2_sums_topk).
// Device code only; included by the kernels under NVRTC.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace moetune {
namespace red {

// 8 consecutive values (16 bytes, 16-byte aligned) packed as 4 pairs.
template <bool HALF>
__device__ __forceinline__ void add8(void* p, uint4 v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (HALF)
    asm volatile("red.global.add.noftz.v4.f16x2 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "r"(v.x),
                 "r"(v.y), "r"(v.z), "r"(v.w)
                 : "memory");
  else
    asm volatile("red.global.add.noftz.v4.bf16x2 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "r"(v.x),
                 "r"(v.y), "r"(v.z), "r"(v.w)
                 : "memory");
#else
  (void)p; (void)v;
  __trap();
#endif
}

// 2 consecutive values (4 bytes, 4-byte aligned), packed.
template <bool HALF>
__device__ __forceinline__ void add2(void* p, unsigned v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (HALF)
    asm volatile("red.global.add.noftz.f16x2 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
  else
    asm volatile("red.global.add.noftz.bf16x2 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
#else
  (void)p; (void)v;
  __trap();
#endif
}

// One value (2 bytes, 2-byte aligned), its bits.
template <bool HALF>
__device__ __forceinline__ void add1(void* p, unsigned short v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (HALF)
    asm volatile("red.global.add.noftz.f16 [%0], %1;\n" ::"l"(p), "h"(v) : "memory");
  else
    asm volatile("red.global.add.noftz.bf16 [%0], %1;\n" ::"l"(p), "h"(v) : "memory");
#else
  (void)p; (void)v;
  __trap();
#endif
}

// Zeroes block `block` of `blocks` equal shares of dst's `vecs` 16-byte vectors (the last share
// shorter), the block's threads striding: every block of a grid calling it with its own index
// zeroes the whole buffer. GEMM1 clears the layer's output this way before GEMM2 adds into it.
template <int THREADS>
__device__ __forceinline__ void zero_share(void* dst, long long vecs, long long block,
                                           long long blocks) {
  const long long per = (vecs + blocks - 1) / blocks;
  const long long lo = block * per;
  const long long hi = lo + per < vecs ? lo + per : vecs;
  uint4* d = static_cast<uint4*>(dst);
  for (long long v = lo + threadIdx.x; v < hi; v += THREADS) d[v] = make_uint4(0, 0, 0, 0);
}

}  // namespace red
}  // namespace moetune
