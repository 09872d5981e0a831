// Device probe (bench/PENDING.md item 3a): how long one warp's route_token (kernels/routing.cuh)
// takes on the critical path of moe_decode_up, apart from loading the router logits. One warp
// routes one token R times in a chain (each call's row pointer depends on the previous call's
// first id, so the calls cannot overlap); the row is in L1 after the first call. Cycles per call
// (clock64) and ns per call (globaltimer), for the anchors' routings and a few cuts of them:
// TOPK 1 against 8 gives the cost of one pick, sigmoid against softmax the normalization's.
// Standalone: nvcc -std=c++17 -O3 -DROUTE_IDS_TEMPLATE -I kernels
//   -gencode arch=compute_90a,code=sm_90a
//   -Xcompiler "-static-libstdc++ -static-libgcc" -o .devbin/route_latency
//   bench/scripts/decode_probe/route_latency.cu ; run: .devbin/route_latency
#include <cuda_runtime.h>

#include <cstdio>

#include "graph_timing.cuh"
#include "routing.cuh"

namespace {
using namespace moetune;
constexpr int kRows = 64, kE = 256, kReps = 2000;

__device__ __forceinline__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// MODE 0: ids and weights; 1: ids only (moe_decode_up's bulk path; routing.cuh with route_token's
// WEIGHTS parameter: -DROUTE_IDS_TEMPLATE).
template <int TOPK, int SCORING, int N_GROUP, int TOPK_GROUP, bool HAS_BIAS, int MODE = 0>
__global__ void chain(const float* logits, const float* bias, long long* out) {
  __shared__ float s_choice[kE];
  const float* row = logits;
  int acc = 0;
  const long long c0 = clock64();
  const unsigned long long t0 = now_ns();
  for (int r = 0; r < kReps; ++r) {
    int ids[TOPK];
    float w[TOPK];
#ifdef ROUTE_IDS_TEMPLATE  // routing.cuh with route_token's WEIGHTS parameter
    route_token<kE, TOPK, SCORING, N_GROUP, TOPK_GROUP, HAS_BIAS, true, MODE == 0>(
        row, bias, s_choice, 1.0f, ids, w);
#else
    route_token<kE, TOPK, SCORING, N_GROUP, TOPK_GROUP, HAS_BIAS, true>(row, bias, s_choice, 1.0f,
                                                                        ids, w);
#endif
    acc += ids[TOPK - 1] + (MODE != 1 && w[0] > 2.0f ? 1 : 0);  // MODE 1: moe_decode_up's use
    row = logits + static_cast<long long>((ids[0] + r) % kRows) * kE;  // the next call waits
  }
  const long long c1 = clock64();
  const unsigned long long t1 = now_ns();
  if (threadIdx.x == 0) {
    out[0] = (c1 - c0);
    out[1] = static_cast<long long>(t1 - t0);
    out[2] = acc;
  }
}

template <class K>
void run(const char* name, K kernel, const float* logits, const float* bias, long long* d) {
  long long h[3];
  for (int rep = 0; rep < 3; ++rep) {  // the last of 3 (the first warms the instruction cache)
    kernel<<<1, 32>>>(logits, bias, d);
    CK(cudaGetLastError());
    CK(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
  }
  std::printf("%-44s %7.0f cycles %7.1f ns per call\n", name, double(h[0]) / kReps,
              double(h[1]) / kReps);
}

__global__ void fill(float* p, int n, unsigned seed) {
  for (int i = threadIdx.x + blockIdx.x * blockDim.x; i < n; i += blockDim.x * gridDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed;
    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
    p[i] = -4.0f + 8.0f * (h >> 8) * (1.0f / 16777216.0f);
  }
}
}  // namespace

int main() {
  float *logits, *bias;
  long long* d;
  CK(cudaMalloc(&logits, sizeof(float) * kRows * kE));
  CK(cudaMalloc(&bias, sizeof(float) * kE));
  CK(cudaMalloc(&d, sizeof(long long) * 3));
  fill<<<16, 256>>>(logits, kRows * kE, 7u);
  fill<<<1, 256>>>(bias, kE, 11u);
  CK(cudaDeviceSynchronize());
  run("softmax e256 top8 (Qwen3.5)", chain<8, 0, 1, 1, false>, logits, bias, d);
  run("softmax e256 top8 ids only (decode up)", chain<8, 0, 1, 1, false, 1>, logits, bias, d);
  run("softmax e256 top1", chain<1, 0, 1, 1, false>, logits, bias, d);
  run("softmax e256 top4", chain<4, 0, 1, 1, false>, logits, bias, d);
  run("sigmoid e256 top8", chain<8, 1, 1, 1, false>, logits, bias, d);
  run("sigmoid e256 top8 g4of8 bias (DeepSeek-V3)", chain<8, 1, 8, 4, true>, logits, bias, d);
  run("sigmoid e256 top1 g4of8 bias", chain<1, 1, 8, 4, true>, logits, bias, d);
  return 0;
}
