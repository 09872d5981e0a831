// Device probe: is the swap-AB block-fp8 GEMM1 at M = 8 (Qwen3.5 fp8 TP4: ~57 active experts x 2
// n256 tiles, each block streaming 256 weight rows x 3072 bytes in 24 K-tiles of 128 bytes per
// row; 26.7 µs alone = 3.35 TB/s in the twelfth-session tune, against ~4.25 TB/s copy rate)
// limited by how its producer copies the ring, or by the access pattern itself? Copies only, no
// MMAs: the kernel's warp-specialized ring (producer warpgroup, `full`/`empty` mbarriers, 128
// consumer threads that take a slot and free it), with the producer's copies done as
//   cpasync  - 16 cp.async of 16 bytes per producer thread per tile (the library's kernel),
//   tma      - one cp.async.bulk.tensor.2d of the 256 x 128-byte box (128-byte swizzle),
//   bulk1d   - 256 cp.async.bulk of one row's 128 bytes, 8 per lane of one warp,
//   cont     - cp.async as cpasync, but each tile a contiguous 32 KB of the block's bytes (control).
//   deepD    - cp.async as cpasync, but a tile is 256 / D rows x 128 D bytes of K (D = 2, 4, 8):
//              the block walks its rows in D groups, each over K, so each row's bytes come in
//              longer runs (a ring unit the sliced kernel could take without repacking weights).
//   dyn<Q>   - cp.async as cpasync, 132 resident blocks that take items from an atomic queue:
//              item = (expert, 256-row tile, K-part of 24 / Q tiles), so a block the memory
//              system serves slowly takes fewer (does uneven service set the static grid's end?).
//   pair     - cp.async, the library's 256 x 128-byte units, but the producer waits for two free
//              slots and copies units t and t + 1 row by row together (each row's 256 bytes
//              requested back to back): deep's runs without changing a unit's shape.
// RING_COPY_DEEP also stamps each block's start and end (globaltimer) in the graph's last launch.
// Grids: M = 8's (57 experts, 114 blocks) and M = 32's (163 experts, 326 blocks); ring depths 2..4.
// Timed as the other probes: a CUDA graph of 32 launches, launch i on weight set i % 4 (402 MB
// each, so every launch reads cold), µs per launch, median of 15 replays.
// Standalone: nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a
//   -I kernels -o .devbin/ring_copy bench/scripts/decode_probe/ring_copy.cu
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <random>
#include <vector>

#include "common/mbarrier.cuh"
#include "common/ptx.cuh"
#include "graph_timing.cuh"

// RING_CP: the cp.async form of every cp.async mode; a build with
// -DRING_CP='"cp.async.cg.shared.global.L2::256B"' asks the L2 to fetch each copy's aligned 256
// bytes from DRAM (the library's MOETUNE_CP_ASYNC_L2_PREFETCH; the tma mode's tensor map has
// the same L2 promotion).
#ifndef RING_CP
#define RING_CP "cp.async.cg.shared.global"
#endif

namespace {
constexpr int kE = 256, kRows = 512, kK = 3072;  // w13 of Qwen3.5 fp8 TP4: [E, 2N, K] e4m3
constexpr long long kSetBytes = 1LL * kE * kRows * kK;
constexpr int kTileRows = 256, kTileK = 128, kTileBytes = kTileRows * kTileK;  // 32 KB
constexpr int kKTiles = kK / kTileK;
constexpr int kSets = 4;
enum Mode { kCpAsync = 0, kTma = 1, kBulk1d = 2, kContiguous = 3, kDynamic = 4, kPair = 5 };
constexpr int kMaxBlocks = 512;

__device__ __forceinline__ unsigned long long globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

struct Experts {
  int id[192];
};

// The library's shared-address and mbarrier helpers (kernels/common/); expect_tx is the TMA's.
using moetune::ptx::smem_addr;
__device__ __forceinline__ void bar_expect(unsigned a, unsigned bytes) {
  asm volatile("{.reg .b64 s; mbarrier.arrive.expect_tx.shared::cta.b64 s, [%0], %1;}" ::"r"(a),
               "r"(bytes)
               : "memory");
}

// Block = 128 producer threads (tid >= 128) + 128 consumer threads, as the library's kernel.
template <int MODE, int STAGES, int KSPLIT = 1, int DEEP = 1>
__global__ void __launch_bounds__(256) ring(const unsigned char* __restrict__ set,
                                            const __grid_constant__ CUtensorMap tmap,
                                            long long set_row0, Experts ex, unsigned* sink,
                                            unsigned long long* stamps, int* queue, int items) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char* smem = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<unsigned long long>(smem_raw) + 1023) & ~1023ull);
  __shared__ __align__(8) unsigned long long bars[2 * STAGES];
  const int tid = threadIdx.x;
  // KSPLIT > 1: the block streams tiles [split * kKTiles / KSPLIT, ...) of its rows (a cluster
  // pair splitting GEMM1's reduction, as a sliced kernel could).
  const int expert = ex.id[blockIdx.x / (2 * KSPLIT)];
  const int row0 = ((blockIdx.x / KSPLIT) % 2) * kTileRows;
  const int kt0 = (blockIdx.x % KSPLIT) * (kKTiles / KSPLIT);
  constexpr int kTiles = kKTiles / KSPLIT;
  if (tid == 0)
    for (int s = 0; s < STAGES; ++s) {
      moetune::mbar::init(smem_addr(&bars[s]), MODE == kCpAsync || MODE == kContiguous ||
                                                       MODE == kPair
                                                   ? 128
                                               : MODE == kDynamic                        ? 129
                                                                                         : 1);
      moetune::mbar::init(smem_addr(&bars[STAGES + s]), 4);
    }
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  __shared__ int s_tag[STAGES];
  __shared__ int s_item;
  if (tid == 0 && stamps != nullptr) stamps[3 * blockIdx.x] = globaltimer();
  __syncthreads();
  if constexpr (MODE == kDynamic) {
    // Producers: take an item, copy its tiles (tag = item), then one slot tagged -1 to stop.
    constexpr int kPerItem = kKTiles / KSPLIT;  // KSPLIT is Q here
    if (tid >= 128) {
      const int p = tid - 128;
      int i = 0, taken = 0;
      for (;;) {
        if (p == 0) s_item = atomicAdd(queue, 1);
        asm volatile("bar.sync 2, 128;" ::: "memory");
        const int item = s_item;
        asm volatile("bar.sync 2, 128;" ::: "memory");
        const bool stop = item >= items;
        const int ex_i = item / (2 * KSPLIT), tile = (item / KSPLIT) % 2, part = item % KSPLIT;
        const unsigned char* w =
            set + ((long long)ex.id[stop ? 0 : ex_i] * kRows + tile * kTileRows) * kK;
        for (int u = 0; u < (stop ? 1 : kPerItem); ++u, ++i) {
          const int st = i % STAGES;
          const unsigned full = smem_addr(&bars[st]);
          if (i >= STAGES)
            moetune::mbar::wait(smem_addr(&bars[STAGES + st]), ((i / STAGES) - 1) & 1);
          const unsigned dst = smem_addr(smem + st * kTileBytes);
          if (!stop) {
            const int ti = part * kPerItem + u;
#pragma unroll
            for (int j = 0; j < 16; ++j) {
              const int idx = p + j * 128, r = idx / 8, c = idx % 8;
              asm volatile(RING_CP " [%0], [%1], 16;" ::"r"(
                               dst + r * 128 + ((c ^ (r & 7)) * 16)),
                           "l"(w + (long long)r * kK + ti * kTileK + c * 16)
                           : "memory");
            }
          }
          moetune::mbar::arrive_on_cp_async(full);
          if (p == 0) {
            s_tag[st] = stop ? -1 : item;
            moetune::mbar::arrive(full);
          }
        }
        if (stop) break;
        ++taken;
      }
      if (p == 0 && stamps != nullptr) stamps[3 * blockIdx.x + 2] = taken;
      return;
    }
  }  // the consumers take tiles below until a slot tagged -1
  const unsigned char* w = set + ((long long)expert * kRows + row0) * kK;
  if (MODE == kPair && tid >= 128) {  // producer, two units at a time
    const int p = tid - 128;
    for (int i = 0; i < kTiles; i += 2) {
      const int st0 = i % STAGES, st1 = (i + 1) % STAGES;
      if (i >= STAGES) moetune::mbar::wait(smem_addr(&bars[STAGES + st0]), ((i / STAGES) - 1) & 1);
      if (i + 1 >= STAGES)
        moetune::mbar::wait(smem_addr(&bars[STAGES + st1]), (((i + 1) / STAGES) - 1) & 1);
      const unsigned d0 = smem_addr(smem + st0 * kTileBytes);
      const unsigned d1 = smem_addr(smem + st1 * kTileBytes);
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        const int idx = p + j * 128, r = idx / 8, c = idx % 8;
        const unsigned off = r * 128 + ((c ^ (r & 7)) * 16);
        const unsigned char* src = w + (long long)r * kK + (kt0 + i) * kTileK + c * 16;
        asm volatile(RING_CP " [%0], [%1], 16;" ::"r"(d0 + off), "l"(src)
                     : "memory");
        asm volatile(RING_CP " [%0], [%1], 16;" ::"r"(d1 + off), "l"(src + kTileK)
                     : "memory");
      }
      // Each arrival waits for all of this thread's copies so far: unit i lands with unit i + 1.
      moetune::mbar::arrive_on_cp_async(smem_addr(&bars[st0]));
      moetune::mbar::arrive_on_cp_async(smem_addr(&bars[st1]));
    }
    return;
  }
  if (tid >= 128) {  // producer
    const int p = tid - 128;
    for (int i = 0; i < kTiles; ++i) {
      const int st = i % STAGES;
      const unsigned full = smem_addr(&bars[st]);
      const int ti = kt0 + i;  // the K-tile copied
      if (i >= STAGES) moetune::mbar::wait(smem_addr(&bars[STAGES + st]), ((i / STAGES) - 1) & 1);
      const unsigned dst = smem_addr(smem + st * kTileBytes);
      if constexpr (MODE == kCpAsync || MODE == kContiguous) {
#pragma unroll
        for (int j = 0; j < 16; ++j) {
          const int idx = p + j * 128;
          // DEEP: row r of the tile's 256 / DEEP (group g), chunk c of its 128 DEEP bytes; the
          // chunk lands in K-subtile c / 8 (each [256 / DEEP][128 B], 128-byte swizzle).
          const int r = idx / (8 * DEEP), c = idx % (8 * DEEP);
          const int g = ti / (kKTiles / DEEP), kk = ti % (kKTiles / DEEP);
          const unsigned char* src =
              MODE == kCpAsync
                  ? w + (long long)(g * (kTileRows / DEEP) + r) * kK + kk * kTileK * DEEP + c * 16
                  : w + (long long)ti * kTileBytes + idx * 16;
          const unsigned off = (c / 8) * (kTileBytes / DEEP) + r * 128 + (((c % 8) ^ (r & 7)) * 16);
          asm volatile(RING_CP " [%0], [%1], 16;" ::"r"(dst + off), "l"(src)
                       : "memory");
        }
        moetune::mbar::arrive_on_cp_async(full);
      } else if constexpr (MODE == kTma) {
        if (p == 0) {
          bar_expect(full, kTileBytes);
          const int c0 = i * kTileK;
          const int c1 = static_cast<int>(set_row0 + (long long)expert * kRows + row0);
          asm volatile(
              "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
              " [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
              "l"(reinterpret_cast<unsigned long long>(&tmap)), "r"(c0), "r"(c1), "r"(full)
              : "memory");
        }
      } else {  // kBulk1d: warp 0 of the producers, 8 rows per lane
        if (p < 32) {
          if (p == 0) bar_expect(full, kTileBytes);
          __syncwarp();
#pragma unroll
          for (int j = 0; j < 8; ++j) {
            const int r = p + 32 * j;
            asm volatile(
                "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                " [%0], [%1], 128, [%2];" ::"r"(dst + r * 128),
                "l"(w + (long long)r * kK + i * kTileK), "r"(full)
                : "memory");
          }
        }
      }
    }
    return;
  }
  // consumer: take each tile, touch one byte per thread (as a wgmma would read it), free the slot
  constexpr int kTaken = MODE == kDynamic ? 1 << 30  // until the stop tag
                         : MODE == kCpAsync || MODE == kContiguous || MODE == kPair ? kTiles
                                                                                    : kKTiles;
  unsigned acc = 0;
  for (int i = 0; i < kTaken; ++i) {
    const int st = i % STAGES;
    moetune::mbar::wait(smem_addr(&bars[st]), (i / STAGES) & 1);
    if (MODE == kDynamic && s_tag[st] < 0) break;
    acc += smem[st * kTileBytes + tid * 128 + (i & 127)];
    __syncwarp();
    if ((tid & 31) == 0) moetune::mbar::arrive(smem_addr(&bars[STAGES + st]));
  }
  if (acc == 0xdeadbeef) atomicAdd(sink, 1u);
  asm volatile("bar.sync 1, 128;" ::: "memory");
  if (tid == 0 && stamps != nullptr) stamps[3 * blockIdx.x + 1] = globaltimer();
}

using EncodeFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                              const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                              const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                              CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

template <int MODE, int STAGES, int KSPLIT = 1, int DEEP = 1>
void run(const char* name, unsigned char* all_sets, const CUtensorMap& tmap, int experts,
         cudaStream_t s, unsigned* sink, unsigned long long* stamps = nullptr,
         int* queues = nullptr) {
  constexpr int R = 32;
  std::mt19937 rng(1 + experts);
  std::vector<Experts> ex(R);
  for (auto& x : ex) pick_experts(rng, kE, experts, true, x.id);
  const int smem = STAGES * kTileBytes + 1024;
  auto kern = ring<MODE, STAGES, KSPLIT, DEEP>;
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  int per_sm = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, 256, smem));
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int items = 2 * experts * KSPLIT;
  const int blocks = MODE == kDynamic ? sms * per_sm : items;
  cudaGraphExec_t ge = capture_graph(s, [&](cudaStream_t st) {
    if (MODE == kDynamic) CK(cudaMemsetAsync(queues, 0, R * sizeof(int), st));
    for (int i = 0; i < R; ++i) {
      const int set = i % kSets;
      kern<<<blocks, 256, smem, st>>>(all_sets + set * kSetBytes, tmap,
                                      (long long)set * kE * kRows, ex[i], sink, stamps,
                                      queues == nullptr ? nullptr : queues + i, items);
    }
  });
  const std::vector<double> us = replay_us(ge, s, R, 15);
  const double med = us[us.size() / 2];
  const double bytes = 2.0 * experts * kTileRows * kK;
  std::printf("%-6s d%d s%d k%d %3d blocks (%d/SM)  %7.2f us  [%.2f, %.2f]  %.2f TB/s", name,
              DEEP, STAGES, KSPLIT, blocks, per_sm, med, us.front(), us.back(),
              bytes / med * 1e-6);
  if (stamps != nullptr) {  // the last launch's blocks: start spread, end min / median / max
    std::vector<unsigned long long> h(3 * blocks);
    CK(cudaMemcpy(h.data(), stamps, h.size() * 8, cudaMemcpyDeviceToHost));
    unsigned long long t0 = ~0ull, s1 = 0;
    std::vector<double> ends, taken;
    for (int b = 0; b < blocks; ++b) {
      t0 = std::min(t0, h[3 * b]);
      s1 = std::max(s1, h[3 * b]);
    }
    for (int b = 0; b < blocks; ++b) {
      ends.push_back((h[3 * b + 1] - t0) * 1e-3);
      taken.push_back(static_cast<double>(h[3 * b + 2]));
    }
    std::sort(ends.begin(), ends.end());
    std::sort(taken.begin(), taken.end());
    std::printf("  | starts within %.2f us, ends %.2f / %.2f / %.2f / %.2f us (min/p10/med/max)",
                (s1 - t0) * 1e-3, ends.front(), ends[blocks / 10], ends[blocks / 2], ends.back());
    if (MODE == kDynamic)
      std::printf(", items per block %.0f..%.0f", taken.front(), taken.back());
  }
  std::printf("\n");
  CK(cudaGraphExecDestroy(ge));
}
}  // namespace

int main() {
  unsigned char* all_sets;
  CK(cudaMalloc(&all_sets, kSetBytes * kSets));
  fill<<<2048, 256>>>(all_sets, kSetBytes * kSets, 7u);
  unsigned* sink;
  CK(cudaMalloc(&sink, 4));
  CK(cudaDeviceSynchronize());
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q;
  CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q));
  if (fn == nullptr) {
    std::printf("no cuTensorMapEncodeTiled\n");
    return 1;
  }
  CUtensorMap tmap;
  const cuuint64_t dims[2] = {kK, (cuuint64_t)kE * kRows * kSets};
  const cuuint64_t strides[1] = {kK};
  const cuuint32_t box[2] = {kTileK, kTileRows};
  const cuuint32_t estr[2] = {1, 1};
  CUresult r = reinterpret_cast<EncodeFn>(fn)(
      &tmap, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, all_sets, dims, strides, box, estr,
      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::printf("cuTensorMapEncodeTiled failed: %d\n", (int)r);
    return 1;
  }
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  // RING_COPY_DEEP=1: longer runs per row without repacking (deepD) against the library's
  // pattern and contiguous tiles, at 57, 101 and 163 experts (M = 8, 16, 32), two passes.
  if (std::getenv("RING_COPY_DEEP") != nullptr) {
    unsigned long long* st;
    int* q;
    CK(cudaMalloc(&st, 3 * kMaxBlocks * sizeof(unsigned long long)));
    CK(cudaMemset(st, 0, 3 * kMaxBlocks * sizeof(unsigned long long)));
    CK(cudaMalloc(&q, 64 * sizeof(int)));
    for (int pass = 0; pass < 2; ++pass)
      for (int experts : {57, 101, 163}) {
        run<kCpAsync, 4, 1, 1>("cpasync", all_sets, tmap, experts, s, sink, st);
        run<kCpAsync, 4, 1, 2>("cpasync", all_sets, tmap, experts, s, sink, st);
        run<kCpAsync, 4, 1, 4>("cpasync", all_sets, tmap, experts, s, sink, st);
        run<kCpAsync, 4, 1, 8>("cpasync", all_sets, tmap, experts, s, sink, st);
        run<kContiguous, 4, 1, 1>("cont", all_sets, tmap, experts, s, sink, st);
        run<kPair, 4, 1, 1>("pair", all_sets, tmap, experts, s, sink, st);
        run<kPair, 6, 1, 1>("pair", all_sets, tmap, experts, s, sink, st);
        run<kCpAsync, 3, 1, 1>("cpasync", all_sets, tmap, experts, s, sink, st);
        run<kDynamic, 4, 2, 1>("dyn", all_sets, tmap, experts, s, sink, st, q);
        run<kDynamic, 4, 4, 1>("dyn", all_sets, tmap, experts, s, sink, st, q);
        run<kDynamic, 4, 8, 1>("dyn", all_sets, tmap, experts, s, sink, st, q);
        run<kDynamic, 3, 4, 1>("dyn", all_sets, tmap, experts, s, sink, st, q);
      }
    CK(cudaDeviceSynchronize());
    return 0;
  }
  // RING_COPY_PF=1: the library's unit shapes (d1: 128-byte runs, as w2's; d2: 256-byte runs,
  // as the sliced kernel's GEMM1) and contiguous tiles at 57 and 101 experts, two passes: built
  // with and without RING_CP's L2::256B, the L2 prefetch size's A/B on copies alone.
  if (std::getenv("RING_COPY_PF") != nullptr) {
    unsigned long long* st;
    CK(cudaMalloc(&st, 3 * kMaxBlocks * sizeof(unsigned long long)));
    CK(cudaMemset(st, 0, 3 * kMaxBlocks * sizeof(unsigned long long)));
    for (int pass = 0; pass < 2; ++pass)
      for (int experts : {57, 101}) {
        run<kCpAsync, 4, 1, 1>("cpasync", all_sets, tmap, experts, s, sink, st);
        run<kCpAsync, 4, 1, 2>("cpasync", all_sets, tmap, experts, s, sink, st);
        run<kContiguous, 4, 1, 1>("cont", all_sets, tmap, experts, s, sink, st);
        run<kTma, 4>("tma", all_sets, tmap, experts, s, sink);
      }
    CK(cudaDeviceSynchronize());
    return 0;
  }
  // RING_COPY_SPLIT=1: the K-split question only (a sliced kernel's cluster pairs): 57 and 101
  // experts (M = 8, 16), each block all or half of its rows' K-tiles.
  if (std::getenv("RING_COPY_SPLIT") != nullptr) {
    for (int experts : {57, 101}) {
      run<kCpAsync, 2, 1>("cpasync", all_sets, tmap, experts, s, sink);
      run<kCpAsync, 3, 1>("cpasync", all_sets, tmap, experts, s, sink);
      run<kCpAsync, 4, 1>("cpasync", all_sets, tmap, experts, s, sink);
      run<kCpAsync, 2, 2>("cpasync", all_sets, tmap, experts, s, sink);
      run<kCpAsync, 3, 2>("cpasync", all_sets, tmap, experts, s, sink);
      run<kCpAsync, 4, 2>("cpasync", all_sets, tmap, experts, s, sink);
      run<kContiguous, 3, 1>("cont", all_sets, tmap, experts, s, sink);
      run<kContiguous, 3, 2>("cont", all_sets, tmap, experts, s, sink);
    }
    CK(cudaDeviceSynchronize());
    return 0;
  }
  for (int experts : {57, 163}) {
    run<kCpAsync, 2>("cpasync", all_sets, tmap, experts, s, sink);
    run<kCpAsync, 3>("cpasync", all_sets, tmap, experts, s, sink);
    run<kCpAsync, 4>("cpasync", all_sets, tmap, experts, s, sink);
    run<kContiguous, 3>("cont", all_sets, tmap, experts, s, sink);
    run<kTma, 2>("tma", all_sets, tmap, experts, s, sink);
    run<kTma, 3>("tma", all_sets, tmap, experts, s, sink);
    run<kTma, 4>("tma", all_sets, tmap, experts, s, sink);
    run<kTma, 6>("tma", all_sets, tmap, experts, s, sink);
    run<kBulk1d, 3>("bulk1d", all_sets, tmap, experts, s, sink);
    run<kBulk1d, 4>("bulk1d", all_sets, tmap, experts, s, sink);
  }
  CK(cudaDeviceSynchronize());
  return 0;
}
