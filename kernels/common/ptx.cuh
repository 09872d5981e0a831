// Inline-PTX wrappers of the mma.sync path: cp.async (16- and 4-byte, zero-fill), an acquire load,
// ldmatrix, the tensor core MMAs (bf16/fp16 m16n8k16, e4m3 m16n8k32 from sm_89) and shared-memory
// address conversion.
// Device code only; included by the kernels under NVRTC.
#pragma once


namespace moetune {
namespace ptx {

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// 16-byte global -> shared copy through L2 only (.cg); src_bytes 0 zero-fills the 16 bytes
// without reading (padding rows, tails). L2_PREFETCH (0, 64, 128 or 256 bytes): PTX's L2 prefetch
// size qualifier (`.L2::256B`: the L2 fetches the aligned 256 bytes around the 16 from DRAM).
// On an H100 SXM (forty-third session, ring_copy) 256 made 128-byte runs per row copy 3% faster
// and 256-byte runs 0.4% slower.
template <int L2_PREFETCH>
__device__ __forceinline__ void cp_async_16_l2(unsigned dst, const void* src, int src_bytes) {
  static_assert(L2_PREFETCH == 0 || L2_PREFETCH == 64 || L2_PREFETCH == 128 || L2_PREFETCH == 256,
                "L2 prefetch sizes: 0, 64, 128, 256");
  if constexpr (L2_PREFETCH == 256)
    asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(src_bytes)
                 : "memory");
  else if constexpr (L2_PREFETCH == 128)
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(src_bytes)
                 : "memory");
  else if constexpr (L2_PREFETCH == 64)
    asm volatile("cp.async.cg.shared.global.L2::64B [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(src_bytes)
                 : "memory");
  else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(src_bytes)
                 : "memory");
}
// MOETUNE_CP_ASYNC_L2_PREFETCH: cp_async_16's size (0 when undefined). The JIT defines it from
// the environment variable of that name (cuda/nvrtc.cpp), so one binary compares sizes.
#ifndef MOETUNE_CP_ASYNC_L2_PREFETCH
#define MOETUNE_CP_ASYNC_L2_PREFETCH 0
#endif
__device__ __forceinline__ void cp_async_16(unsigned dst, const void* src, int src_bytes) {
  cp_async_16_l2<MOETUNE_CP_ASYNC_L2_PREFETCH>(dst, src, src_bytes);
}
// A 4-byte global -> shared copy (through L1: .ca is the only cp.async of 4 bytes); src_bytes 0
// zero-fills. The GEMM kernels' per-slot scales ride with their ring slot this way.
__device__ __forceinline__ void cp_async_4(unsigned dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes)
               : "memory");
}
// A load with acquire semantics at GPU scope: a flag another block released (its stores, a
// __threadfence, then the flag's atomic) before the data it guards is read.
__device__ __forceinline__ int ld_acquire_gpu(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
// Hopper (sm_90a): the warp's warpgroup gives registers back to the block's pool / takes them
// (every warp of the warpgroup executes the same one; REGS in 24..256, a multiple of 8).
template <int REGS>
__device__ __forceinline__ void setmaxnreg_dec() {
  static_assert(REGS % 8 == 0 && REGS >= 24 && REGS <= 256, "setmaxnreg: 24..256, steps of 8");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REGS));
}
template <int REGS>
__device__ __forceinline__ void setmaxnreg_inc() {
  static_assert(REGS % 8 == 0 && REGS >= 24 && REGS <= 256, "setmaxnreg: 24..256, steps of 8");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REGS));
}
// Waits until at most PENDING committed groups are still in flight.
template <int PENDING>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING) : "memory");
}

// Four 8x(16-byte) matrices; lanes 8i..8i+7 give the row addresses of matrix i.
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// d += a * b, a 16x16 row-major (4 regs), b 16x8 col-major (2 regs), d 16x8 fp32 (4 regs).
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const unsigned (&a)[4],
                                               unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma_fp16_16816(float (&d)[4], const unsigned (&a)[4],
                                               unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// e4m3 x e4m3, k32: the same register/byte layout as the 16-bit k16 MMA.
__device__ __forceinline__ void mma_e4m3_16832(float (&d)[4], const unsigned (&a)[4],
                                               unsigned b0, unsigned b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  (void)d; (void)a; (void)b0; (void)b1;
  __trap();  // fp8 tensor cores need sm_89+ (the host refuses fp8 below sm_89)
#endif
}

}  // namespace ptx
}  // namespace moetune
