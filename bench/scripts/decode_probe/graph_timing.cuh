// What the standalone probes of this folder share: CUDA error checks, timing a CUDA graph of R
// back-to-back calls as `moetune bench` does (warm-up replays, then per-call µs of each replay),
// and their inputs (weight bytes, the experts a call picks).
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <random>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                                \
  do {                                                                                       \
    cudaError_t e_ = (x);                                                                    \
    if (e_ != cudaSuccess) {                                                                 \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

// A graph of whatever enqueue(stream) launches on s, instantiated.
template <class F>
cudaGraphExec_t capture_graph(cudaStream_t s, F&& enqueue) {
  cudaGraph_t g;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  enqueue(s);
  CK(cudaStreamEndCapture(s, &g));
  cudaGraphExec_t ge;
  CK(cudaGraphInstantiate(&ge, g, 0));
  CK(cudaGraphDestroy(g));
  return ge;
}

// Three warm-up replays of ge, then `replays` timed ones; µs per call (replay / calls), sorted.
inline std::vector<double> replay_us(cudaGraphExec_t ge, cudaStream_t s, int calls, int replays) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int w = 0; w < 3; ++w) CK(cudaGraphLaunch(ge, s));
  std::vector<double> us;
  for (int r = 0; r < replays; ++r) {
    CK(cudaEventRecord(a, s));
    CK(cudaGraphLaunch(ge, s));
    CK(cudaEventRecord(b, s));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    us.push_back(ms * 1e3 / calls);
  }
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  std::sort(us.begin(), us.end());
  return us;
}

// Arbitrary weight bytes (the probes copy, they do not multiply).
__global__ void fill(unsigned char* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    p[i] = static_cast<unsigned char>((i * 2654435761u) ^ seed);
}

// `picks` distinct experts of 0..experts-1 at random into ids; sorted: in the alignment's order.
inline void pick_experts(std::mt19937& rng, int experts, int picks, bool sorted, int* ids) {
  std::vector<int> all(experts);
  for (int i = 0; i < experts; ++i) all[i] = i;
  std::shuffle(all.begin(), all.end(), rng);
  if (sorted) std::sort(all.begin(), all.begin() + picks);
  std::copy(all.begin(), all.begin() + picks, ids);
}
