// Device probe: how fast can the H200 stream what moe_decode_up streams at M = 1 on Qwen3.5 fp8
// TP4 (8 experts' w13, 1.5 MB contiguous each, 12.6 MB, out of 16 rotating 402 MB weight sets),
// with nothing but copies? Each block cp.asyncs its share into shared memory (no registers held,
// everything in flight at once), then waits. Timed as the decode probe times a layer: a CUDA graph
// of 64 launches, launch i on set i % 16 with its own 8 random experts; µs per launch.
// Variants: the up kernel's grid (128 blocks x 96 KB), 4x and 16x more blocks with smaller shares,
// a control that reads 12.6 MB contiguous from the start of each set, and the launch cost alone.
// Standalone: nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a
//   -o .devbin/slice_copy bench/scripts/decode_probe/slice_copy.cu
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "graph_timing.cuh"

namespace {
constexpr long long kExpertBytes = 2LL * 256 * 3072;  // w13 of one expert, e4m3
constexpr int kE = 256, kTopk = 8, kSets = 16;

struct Experts {
  int id[kTopk];
};

// Block b copies bytes [b * share, (b + 1) * share) of the 8 experts' concatenated slices
// (contiguous: expert ids[0..7] of `set`, or the set's first 12.6 MB when contiguous).
__global__ void __launch_bounds__(256) copy_slices(const unsigned char* set, Experts ex,
                                                    int share, bool contiguous, unsigned* sink) {
  extern __shared__ __align__(16) unsigned char buf[];
  const long long first = static_cast<long long>(blockIdx.x) * share;
  const long long e = first / kExpertBytes, off = first % kExpertBytes;
  const unsigned char* src =
      set + (contiguous ? first : static_cast<long long>(ex.id[e]) * kExpertBytes + off);
  const unsigned base = static_cast<unsigned>(__cvta_generic_to_shared(buf));
  for (int i = threadIdx.x * 16; i < share; i += blockDim.x * 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(base + i), "l"(src + i)
                 : "memory");
  asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::: "memory");
  __syncthreads();
  if (threadIdx.x == 0 && buf[share / 2] == 0xff && buf[0] == 0xff) atomicAdd(sink, 1u);
}

}  // namespace

int main() {
  std::vector<unsigned char*> sets(kSets);
  for (int i = 0; i < kSets; ++i) {
    CK(cudaMalloc(&sets[i], kExpertBytes * kE));
    fill<<<1024, 256>>>(sets[i], kExpertBytes * kE, 7u + i);
  }
  unsigned* sink;
  CK(cudaMalloc(&sink, 4));
  CK(cudaDeviceSynchronize());
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  constexpr int R = 64;
  std::mt19937 rng(1);
  std::vector<Experts> ex(R);
  for (auto& x : ex) pick_experts(rng, kE, kTopk, false, x.id);
  const long long total = kExpertBytes * kTopk;
  struct V {
    const char* name;
    int blocks;
    bool contiguous;
    int share;  // bytes per block; 0: total / blocks
  } variants[] = {{"128 x 96 KB (the up grid)", 128, false, 0},
                  {"512 x 24 KB", 512, false, 0},
                  {"2048 x 6 KB", 2048, false, 0},
                  {"128 x 96 KB contiguous", 128, true, 0},
                  {"2048 x 6 KB contiguous", 2048, true, 0},
                  {"128 x 16 B (launch cost)", 128, true, 16}};
  for (const V& v : variants) {
    const int share = v.share > 0 ? v.share : static_cast<int>(total / v.blocks);
    CK(cudaFuncSetAttribute(copy_slices, cudaFuncAttributeMaxDynamicSharedMemorySize, share));
    for (bool cold : {true, false}) {
      cudaGraphExec_t ge = capture_graph(s, [&](cudaStream_t st) {
        for (int i = 0; i < R; ++i)
          copy_slices<<<v.blocks, 256, share, st>>>(sets[cold ? i % kSets : 0], ex[cold ? i : 0],
                                                    share, v.contiguous, sink);
      });
      const std::vector<double> us = replay_us(ge, s, R, 20);
      const double med = us[us.size() / 2];
      std::printf("%-28s %s  %7.2f us per launch (min %.2f max %.2f)  %.2f TB/s\n", v.name,
                  cold ? "cold" : "hot ", med, us.front(), us.back(),
                  static_cast<double>(share) * v.blocks / med * 1e-6);
      CK(cudaGraphExecDestroy(ge));
    }
  }
  return 0;
}
