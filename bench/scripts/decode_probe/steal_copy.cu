// Device probe: would the sliced kernel (kernels/moe_gemms_sliced_sm90a.cuh) end sooner if blocks
// that finish early took GEMM2 units from blocks still going? ring_copy found that one launch's
// blocks, each with equal copies, end 26.4..32.4 µs apart (uneven service), and that a queue of
// small items evens that out. A sliced block's GEMM1 units can't move (the reduction over K is
// the block's own), but once a block has its slice's activation, each of its GEMM2 units (256 w2
// rows x the slice's 128 columns) is independent: another block holding that activation (2 KB,
// which the owner would publish) could copy and multiply it. Copies only, no MMAs, the sliced
// kernel's ring and patterns (Qwen3.5 fp8 TP4: w13 [256, 512, 3072], w2 [256, 3072, 256]):
//   each block (item = expert x 128-column slice) copies its 24 GEMM1 units (128 rows x 256 B
//   of K) and then GEMM2 units claimed one at a time from its item's counter;
//   STEAL = 1: a block whose own counter is spent takes units from the published item (its
//   consumers past the last GEMM1 unit) with the most left, while any started item has some;
//   STEAL = 2: as 1, and the grid fills the SMs: blocks past the items only steal (the real
//   kernel's grid covers the worst case of m-blocks: at M = 8 about 128 blocks for 114 items).
// Publication comes when the owner's consumers take the last GEMM1 unit, about 1 µs before the
// real kernel's (its activation epilogue), so this is an upper bound on the gain.
// Grids: M = 8's (57 experts, 114 blocks, one wave) and M = 16's (101 experts, 202 blocks).
// Timed as the other probes: a CUDA graph of 32 launches on 4 rotating weight sets (cold), µs
// per launch, median of 15 replays; the last launch's blocks stamp their start and end.
// Standalone: nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a
//   -I kernels -o .devbin/steal_copy bench/scripts/decode_probe/steal_copy.cu
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

#include "common/mbarrier.cuh"
#include "common/ptx.cuh"
#include "graph_timing.cuh"

namespace {
constexpr int kE = 256, kN = 256, kK = 3072;  // experts, intermediate (per rank), hidden
constexpr long long kW13Bytes = 1LL * kE * 2 * kN * kK, kW2Bytes = 1LL * kE * kK * kN;
constexpr int kSets = 4, kLaunches = 32, kMaxItems = 256;
constexpr int kUnitBytes = 32768;
constexpr int kU1 = 2 * kK / 256;  // GEMM1 units: gate then up, 256 deep each
constexpr int kU2 = kK / 256;      // GEMM2 units: 256 w2 rows each
using moetune::ptx::smem_addr;

struct Experts {
  int id[kMaxItems / 2];
};

__device__ __forceinline__ unsigned long long globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ int ld_relaxed(const int* p) {
  int v;
  asm volatile("ld.relaxed.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// ctr: [next[kMaxItems], pub[kMaxItems], started[kMaxItems]] for this launch, zero on entry.
template <int STAGES, int STEAL>
__global__ void __launch_bounds__(256, 1)
    steal(const unsigned char* __restrict__ w13, const unsigned char* __restrict__ w2, Experts ex,
          int items, int* ctr, unsigned long long* stamps, unsigned* sink) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char* smem = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<unsigned long long>(smem_raw) + 1023) & ~1023ull);
  __shared__ __align__(8) unsigned long long bars[2 * STAGES];
  __shared__ int s_tag[STAGES];
  __shared__ int s_claim;
  int* next = ctr;
  int* pub = ctr + kMaxItems;
  int* started = ctr + 2 * kMaxItems;
  const int tid = threadIdx.x, b = blockIdx.x;
  if (tid == 0) {
    stamps[3 * b] = globaltimer();
    if (b < items) atomicExch(started + b, 1);
    for (int s = 0; s < STAGES; ++s) {
      moetune::mbar::init(smem_addr(&bars[s]), 129);  // 128 copy arrivals + the tag's
      moetune::mbar::init(smem_addr(&bars[STAGES + s]), 4);
    }
  }
  __syncthreads();
  if (tid >= 128) {  // producer
    const int p = tid - 128;
    int i = 0;
    auto slot = [&](int tag) {  // waits for slot i's release; returns its shared address
      const int st = i % STAGES;
      if (i >= STAGES) moetune::mbar::wait(smem_addr(&bars[STAGES + st]), ((i / STAGES) - 1) & 1);
      if (p == 0) s_tag[st] = tag;
      return smem_addr(smem + st * kUnitBytes);
    };
    auto announce = [&] {
      const unsigned full = smem_addr(&bars[i % STAGES]);
      moetune::mbar::arrive_on_cp_async(full);
      if (p == 0) moetune::mbar::arrive(full);
      ++i;
    };
    if (b < items) {  // GEMM1: unit (h, k) = rows h N + 128 j + r (r < 128), bytes [256 k, ...)
      const int e = ex.id[b / 2], j = b % 2, urow0 = p / 16, uc = p % 16;
      const int usw = (uc / 8) * (128 * 128) + urow0 * 128 + ((uc % 8) ^ (urow0 & 7)) * 16;
      const unsigned char* base = w13 + ((long long)e * 2 * kN + j * 128 + urow0) * kK + uc * 16;
      for (int u = 0; u < kU1; ++u) {
        const int h = u / (kU1 / 2), k = u % (kU1 / 2);
        const unsigned dst = slot(1000 + u);
        const unsigned char* src = base + (long long)h * kN * kK + k * 256;
#pragma unroll
        for (int r = 0; r < 16; ++r)
          moetune::ptx::cp_async_16(dst + usw + r * 8 * 128, src + (long long)(8 * r) * kK, 16);
        announce();
      }
    }
    // GEMM2 units, claimed one at a time: the own item's, then (STEAL) others'.
    const int row0 = p / 8, chunk = p % 8;
    const int dst0 = row0 * 128 + (chunk ^ (row0 & 7)) * 16;
    int cur = b, stolen = 0, polls = 0;
    for (;;) {
      asm volatile("bar.sync 2, 128;" ::: "memory");  // s_claim's last reader is done
      if (p < 32) {
        int got = -1;
        if (p == 0) {
          const int u = cur < items ? atomicAdd(next + cur, 1) : kU2;
          if (u < kU2) got = cur * 16 + u;
        }
        got = __shfl_sync(~0u, got, 0);
        // A thief: the warp looks for the published item with the most units left, while any
        // started item is yet to publish (those blocks are running: no wait on an unstarted one).
        while (STEAL && got < 0) {
          int best = -1, left = 0, pending = 0;
          for (int c = p; c < items; c += 32) {
            if (ld_relaxed(pub + c) != 0) {
              const int l = kU2 - ld_relaxed(next + c);
              if (l > left) left = l, best = c;
            } else if (ld_relaxed(started + c) != 0) {
              pending = 1;
            }
          }
#pragma unroll
          for (int o = 16; o > 0; o /= 2) {
            const int l2 = __shfl_xor_sync(~0u, left, o), b2 = __shfl_xor_sync(~0u, best, o);
            if (l2 > left || (l2 == left && b2 > best)) left = l2, best = b2;
          }
          // A block may not have marked itself started yet: scan a few times regardless
          // (never longer: one that cannot start must not hold the thieves).
          pending = __any_sync(~0u, pending) || ++polls < 16;
          if (best >= 0) {
            if (p == 0) {
              const int u = atomicAdd(next + best, 1);
              if (u < kU2) got = best * 16 + u;
            }
            got = __shfl_sync(~0u, got, 0);
            if (got >= 0) {
              cur = best;
              ++stolen;
            }
          } else if (!pending) {
            break;
          } else {
            __nanosleep(256);
          }
        }
        if (p == 0) s_claim = got;
      }
      asm volatile("bar.sync 2, 128;" ::: "memory");
      const int got = s_claim;
      const unsigned dst = slot(got);
      if (got >= 0) {
        const int c = got / 16, u = got % 16;
        const unsigned char* src =
            w2 + ((long long)ex.id[c / 2] * kK + 256 * u + row0) * kN + (c % 2) * 128 + chunk * 16;
#pragma unroll
        for (int r = 0; r < 16; ++r)
          moetune::ptx::cp_async_16(dst + dst0 + r * 16 * 128, src + (long long)(16 * r) * kN, 16);
      }
      announce();
      if (got < 0) break;
    }
    if (p == 0) stamps[3 * b + 2] = static_cast<unsigned long long>(stolen);
    return;
  }
  // consumers: take each unit, touch one byte per thread (as a wgmma would read it), free the
  // slot; publish the item after the last GEMM1 unit.
  unsigned acc = 0;
  for (int i = 0;; ++i) {
    const int st = i % STAGES;
    moetune::mbar::wait(smem_addr(&bars[st]), (i / STAGES) & 1);
    const int tag = s_tag[st];
    if (tag < 0) break;
    acc += smem[st * kUnitBytes + tid * 128 + (i & 127)];
    __syncwarp();
    if ((tid & 31) == 0) moetune::mbar::arrive(smem_addr(&bars[STAGES + st]));
    if (b < items && i == kU1 - 1) {
      asm volatile("bar.sync 1, 128;" ::: "memory");
      if (tid == 0) atomicExch(pub + b, 1);
    }
  }
  if (acc == 0xdeadbeef) atomicAdd(sink, 1u);
  asm volatile("bar.sync 1, 128;" ::: "memory");
  if (tid == 0) stamps[3 * b + 1] = globaltimer();
}

template <int STAGES, int STEAL>
void run(unsigned char* w13, unsigned char* w2, int experts, int* ctr, unsigned long long* stamps,
         unsigned* sink, cudaStream_t s) {
  std::mt19937 rng(1 + experts);
  std::vector<Experts> ex(kLaunches);
  for (auto& x : ex) pick_experts(rng, kE, experts, true, x.id);
  const int smem = STAGES * kUnitBytes + 1024, items = 2 * experts;
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int grid = STEAL == 2 ? std::max(items, sms) : items;
  auto kern = steal<STAGES, STEAL>;
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  cudaGraphExec_t ge = capture_graph(s, [&](cudaStream_t st) {
    CK(cudaMemsetAsync(ctr, 0, kLaunches * 3 * kMaxItems * sizeof(int), st));
    for (int i = 0; i < kLaunches; ++i)
      kern<<<grid, 256, smem, st>>>(w13 + (i % kSets) * kW13Bytes, w2 + (i % kSets) * kW2Bytes,
                                     ex[i], items, ctr + i * 3 * kMaxItems, stamps, sink);
  });
  const std::vector<double> us = replay_us(ge, s, kLaunches, 15);
  const double med = us[us.size() / 2];
  const double bytes = (double)items * (kU1 + kU2) * kUnitBytes;
  std::vector<unsigned long long> h(3 * grid);
  CK(cudaMemcpy(h.data(), stamps, h.size() * 8, cudaMemcpyDeviceToHost));
  unsigned long long t0 = ~0ull, s1 = 0;
  for (int b = 0; b < grid; ++b) t0 = std::min(t0, h[3 * b]), s1 = std::max(s1, h[3 * b]);
  std::vector<double> ends;
  unsigned long long stolen = 0, thieves = 0;
  for (int b = 0; b < grid; ++b) {
    ends.push_back((h[3 * b + 1] - t0) * 1e-3);
    stolen += h[3 * b + 2];
    thieves += h[3 * b + 2] > 0;
  }
  std::sort(ends.begin(), ends.end());
  std::printf(
      "steal=%d s%d %3d blocks  %7.2f us  [%.2f, %.2f]  %.2f TB/s | starts within %.2f us, ends "
      "%.2f / %.2f / %.2f us (min/med/max), %llu units stolen by %llu blocks\n",
      STEAL, STAGES, grid, med, us.front(), us.back(), bytes / med * 1e-6, (s1 - t0) * 1e-3,
      ends.front(), ends[grid / 2], ends.back(), stolen, thieves);
  CK(cudaGraphExecDestroy(ge));
}
}  // namespace

int main() {
  unsigned char *w13, *w2;
  CK(cudaMalloc(&w13, kW13Bytes * kSets));
  CK(cudaMalloc(&w2, kW2Bytes * kSets));
  fill<<<2048, 256>>>(w13, kW13Bytes * kSets, 7u);
  fill<<<2048, 256>>>(w2, kW2Bytes * kSets, 9u);
  unsigned* sink;
  int* ctr;
  unsigned long long* stamps;
  CK(cudaMalloc(&sink, 4));
  CK(cudaMalloc(&ctr, kLaunches * 3 * kMaxItems * sizeof(int)));
  CK(cudaMalloc(&stamps, 3 * kMaxItems * sizeof(unsigned long long)));
  CK(cudaDeviceSynchronize());
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (int pass = 0; pass < 2; ++pass)
    for (int experts : {57, 101}) {
      run<4, 0>(w13, w2, experts, ctr, stamps, sink, s);
      run<4, 1>(w13, w2, experts, ctr, stamps, sink, s);
      if (2 * experts < 132) run<4, 2>(w13, w2, experts, ctr, stamps, sink, s);
    }
  CK(cudaDeviceSynchronize());
  return 0;
}
