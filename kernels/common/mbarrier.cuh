// Shared-memory mbarriers (sm_90): the hand-off between the producer warpgroup that copies K-tiles
// into the ring and the consumer warpgroups that run wgmma on them (kernels/moe_gemm_wgmma_sm90a.cuh).
// A barrier completes a phase when `count` arrivals have happened; waiters name the phase by its
// parity (0, 1, 0, ...), so a ring slot's k-th use waits for parity k & 1.
#pragma once

namespace moetune {
namespace mbar {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define MOETUNE_MBAR_OK 1
#else
#define MOETUNE_MBAR_OK 0
#endif

__device__ __forceinline__ void init(unsigned addr, unsigned count) {
#if MOETUNE_MBAR_OK
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(addr), "r"(count) : "memory");
#else
  (void)addr; (void)count;
  __trap();
#endif
}

// One arrival, release semantics at CTA scope: this thread's earlier writes (made visible to the
// async proxy by a fence.proxy.async before it) happen before the waiter's later reads.
__device__ __forceinline__ void arrive(unsigned addr) {
#if MOETUNE_MBAR_OK
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(addr)
               : "memory");
#else
  (void)addr;
  __trap();
#endif
}

// One arrival that also expects `bytes` more of asynchronous copies (cp.async.bulk's
// complete_tx) before the phase can complete.
__device__ __forceinline__ void arrive_expect_tx(unsigned addr, unsigned bytes) {
#if MOETUNE_MBAR_OK
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}\n" ::"r"(
                   addr),
               "r"(bytes)
               : "memory");
#else
  (void)addr; (void)bytes;
  __trap();
#endif
}

// Makes the mbarrier inits of this thread visible to the other threads and to the async proxy
// (the bulk copies that complete on them); a __syncthreads must still follow.
__device__ __forceinline__ void fence_init() {
#if MOETUNE_MBAR_OK
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

// A 1-D bulk copy (the TMA, sm_90) of `bytes` (a multiple of 16; both addresses 16-byte
// aligned) from global `src` to shared `dst` that completes its bytes on the mbarrier at `bar`.
__device__ __forceinline__ void bulk_copy_g2s(unsigned dst, const void* src, unsigned bytes,
                                              unsigned bar) {
#if MOETUNE_MBAR_OK
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
          "r"(dst),
      "l"(src), "r"(bytes), "r"(bar)
      : "memory");
#else
  (void)dst; (void)src; (void)bytes; (void)bar;
  __trap();
#endif
}

// An arrival that happens when every cp.async this thread issued before it has landed, without
// raising the pending count (.noinc): `count` at init must include these arrivals.
__device__ __forceinline__ void arrive_on_cp_async(unsigned addr) {
#if MOETUNE_MBAR_OK
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(addr) : "memory");
#else
  (void)addr;
  __trap();
#endif
}

// Blocks until the phase of parity `parity` has completed (acquire at CTA scope).
__device__ __forceinline__ void wait(unsigned addr, unsigned parity) {
#if MOETUNE_MBAR_OK
  asm volatile(
      "{\n.reg .pred done;\n"
      "wait_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n}\n" ::"r"(addr),
      "r"(parity)
      : "memory");
#else
  (void)addr; (void)parity;
  __trap();
#endif
}

}  // namespace mbar
}  // namespace moetune
