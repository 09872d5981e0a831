// Thread-block clusters (sm_90): the cluster barrier, a peer block's shared memory (distributed
// shared memory) and arrivals on a peer's mbarrier. For the sliced kernel's pairs, whose two
// blocks swap their halves of the activation (kernels/moe_gemms_sliced_sm90a.cuh).
// Device code only; included by the kernels under NVRTC.
#pragma once

namespace moetune {
namespace cluster {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define MOETUNE_CLUSTER_OK 1
#else
#define MOETUNE_CLUSTER_OK 0
#endif

// The blocks in this block's cluster (1 without a cluster launch).
__device__ __forceinline__ unsigned blocks() {
  unsigned n = 1;
#if MOETUNE_CLUSTER_OK
  asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(n));
#endif
  return n;
}

// This thread's generic-proxy writes to shared memory, local or a peer's, made visible to the
// async proxy (a peer's wgmma reading them) before the release that follows.
__device__ __forceinline__ void fence_proxy_async() {
#if MOETUNE_CLUSTER_OK
  asm volatile("fence.proxy.async.shared::cluster;\n" ::: "memory");
#endif
}

// The cluster barrier's two halves (release / acquire): a thread's arrive, then later its wait,
// which returns once every non-exited thread of the cluster has arrived.
__device__ __forceinline__ void arrive() {
#if MOETUNE_CLUSTER_OK
  asm volatile("barrier.cluster.arrive.release;\n" ::: "memory");
#else
  __trap();
#endif
}
__device__ __forceinline__ void wait() {
#if MOETUNE_CLUSTER_OK
  asm volatile("barrier.cluster.wait.acquire;\n" ::: "memory");
#else
  __trap();
#endif
}

// The shared::cluster address of the same offset in block `peer`'s shared memory.
__device__ __forceinline__ unsigned map(unsigned smem_addr, unsigned peer) {
  unsigned out = 0;
#if MOETUNE_CLUSTER_OK
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(out) : "r"(smem_addr), "r"(peer));
#else
  (void)smem_addr; (void)peer;
  __trap();
#endif
  return out;
}

// A 4-byte store to a shared::cluster address (map()).
__device__ __forceinline__ void store(unsigned cluster_addr, unsigned v) {
#if MOETUNE_CLUSTER_OK
  asm volatile("st.shared::cluster.u32 [%0], %1;\n" ::"r"(cluster_addr), "r"(v) : "memory");
#else
  (void)cluster_addr; (void)v;
  __trap();
#endif
}

// One arrival on a peer's mbarrier (map()), releasing this thread's earlier writes at cluster
// scope.
__device__ __forceinline__ void arrive_remote(unsigned cluster_bar) {
#if MOETUNE_CLUSTER_OK
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(cluster_bar)
               : "memory");
#else
  (void)cluster_bar;
  __trap();
#endif
}

// Blocks until this block's mbarrier completes the phase of parity `parity`, acquiring at
// cluster scope what the arrivals (arrive_remote) released.
__device__ __forceinline__ void wait_local(unsigned bar, unsigned parity) {
#if MOETUNE_CLUSTER_OK
  asm volatile(
      "{\n.reg .pred done;\n"
      "wait_%=:\n"
      "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
#else
  (void)bar; (void)parity;
  __trap();
#endif
}

}  // namespace cluster
}  // namespace moetune
