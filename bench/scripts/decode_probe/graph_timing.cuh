// What the standalone probes of this folder share: CUDA error checks, and timing a CUDA graph of
// R back-to-back calls as `moetune bench` does (warm-up replays, then per-call µs of each replay).
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
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
