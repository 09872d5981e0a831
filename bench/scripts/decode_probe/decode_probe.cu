// Device probe (bench/PENDING.md item 3, Qwen3.5-122B-A10B fp8 TP4 at M = 1..4): the decode
// kernels of kernels/moe_decode.cuh (its up_block and down_block in wrappers that stamp), timed
// as `moetune bench` times the layer (a CUDA graph of R layers back to back with PDL, cold: 16
// weight sets in rotation, 9.7 GB), with two load batchings and with precomputed ids (the
// routing's share), and a timeline of each block's start, wait and end (%globaltimer) to see
// where the time of one layer goes.
// Standalone (not part of the build): nvcc -std=c++17 -O3 -I kernels
//   -gencode arch=compute_90a,code=sm_90a -o .devbin/decode_probe
//   bench/scripts/decode_probe/decode_probe.cu ; run by bench/scripts/decode_probe/run.sh.
// Prints one line per (variant, M, hot/cold): median µs per layer and the spread of replays.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "graph_timing.cuh"
#include "moe_decode.cuh"

namespace {
using namespace moetune;
constexpr int kE = 256, kK = 3072, kN = 256, kTopk = 8, kB = 128, kSets = 16;
constexpr int kAct = tile_math::kDtypeBf16;
constexpr int kMaxM = 4;
constexpr int kPoints = 8;

__device__ __forceinline__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Timeline stamps: [layer][block][point], point 0 entry, 1 after the wait, 2 end, 2 + p the
// kernel body's mark(p) (up_block: 1 routed, 2 warp 1's hidden-state share, 3 both in shared
// memory, 4 warp 0 streamed; down_block: 1 routed, 2 w2 loads issued, 3 released, 4 act row
// ready, 5 products done).
struct Stamps {
  unsigned long long* p = nullptr;
  int blocks = 0;  // per layer
  __device__ void mark(int layer, int block, int point) const {  // the caller picks the thread
    if (p != nullptr) p[(static_cast<long long>(layer) * blocks + block) * kPoints + point] = now_ns();
  }
};

template <int BATCH, int PIECES, bool ROUTE>
__global__ void __launch_bounds__(256)
    up_k(const float* logits, const int* ids_in, int* ids_out, float* w_out, const void* x,
         const unsigned char* w13, const float* w13s, void* act, Stamps st, int layer) {
  const int blk = blockIdx.y * gridDim.x + blockIdx.x;
  if (threadIdx.x == 0) st.mark(layer, blk, 0);
  pdl_wait();
  pdl_launch_dependents();
  if (threadIdx.x == 0) st.mark(layer, blk, 1);
  decode_detail::up_block<kAct, true, kK, kN, kTopk, kB, kB, 4, BATCH, PIECES, ROUTE, kE, 0, 1, 1,
                          false, true>(logits, nullptr, ids_in, ids_out, w_out, 1.0f, x, w13, w13s, act,
                                0, kE, blockIdx.x, blockIdx.y,
                                [&](int point) { st.mark(layer, blk, point + 2); });
  __syncthreads();
  if (threadIdx.x == 0) st.mark(layer, blk, 2);
}

template <bool ROUTE, bool UP_BULK>
__global__ void __launch_bounds__(256)
    down_k(const float* logits, const int* ids_in, const float* w_in, int* ids_out, float* w_out,
           const void* act, const unsigned char* w2, const float* w2s, void* out, Stamps st,
           int layer, int up_blocks) {
  const int blk = up_blocks + blockIdx.y * gridDim.x + blockIdx.x;
  if (threadIdx.x == 0) st.mark(layer, blk, 0);
  decode_detail::down_block<kAct, true, kK, kN, kTopk, kB, kB, ROUTE, kE, 0, 1, 1, false, true,
                            UP_BULK>(
      logits, nullptr, ids_in, w_in, ids_out, w_out, 1.0f, act, w2, w2s, out, 0, kE, blockIdx.x,
      blockIdx.y, [&] {
        pdl_wait();
        pdl_launch_dependents();
        __syncthreads();
        if (threadIdx.x == 0) st.mark(layer, blk, 1);
      },
      [&](int point) { st.mark(layer, blk, point + 2); });
  __syncthreads();
  if (threadIdx.x == 0) st.mark(layer, blk, 2);
}

__global__ void fill_bytes(unsigned char* p, size_t n, unsigned seed, unsigned mask) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
    p[i] = (unsigned char)(h & mask);
  }
}
__global__ void fill_float(float* p, size_t n, unsigned seed, float lo, float hi) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
    p[i] = lo + (hi - lo) * (h >> 8) * (1.0f / 16777216.0f);
  }
}
__global__ void fill_bf16(unsigned short* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
    p[i] = __bfloat16_as_ushort(__float2bfloat16(-1.0f + 2.0f * (h >> 8) * (1.0f / 16777216.0f)));
  }
}

struct Set {
  unsigned char *w13, *w2;
  float *w13s, *w2s, *logits;
  unsigned short* x;
};

struct Bufs {
  std::vector<Set> sets;
  unsigned short *act, *out;
  int* ids;
  float* wts;
};

// A launch with PDL (as the library's stage kernels are launched).
template <class Kern, class... Args>
cudaError_t try_launch(Kern k, dim3 grid, dim3 block, size_t smem, cudaStream_t s, Args... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, k, args...);
}
template <class Kern, class... Args>
void launch(Kern k, dim3 grid, dim3 block, cudaStream_t s, Args... args) {
  CK(try_launch(k, grid, block, 0, s, args...));
}

// The up kernel variants: load batches of 6 or 12 chunks, or all of a warp's share by bulk
// copies (1-D TMA) in 2 or 3 pieces per row slice (the library's M = 1 path on sm_90:
// 2 pieces, 16 rows x (768 + 64 padding) bytes per warp), routed or with precomputed ids.
// (The tenth session's shared-memory ring variants, which lost: bench/results/
// 2026-12-01_h200_tenth_session/call7/decode_probe_ring_variants.cu.txt.)
struct UpVariant {
  const char* name;
  void (*kernel)(const float*, const int*, int*, float*, const void*, const unsigned char*,
                 const float*, void*, Stamps, int);
  bool ids;  // precomputed ids (the routed run's, set 0)
  int smem;  // dynamic shared memory (bulk variants)
};
constexpr int kBulkSmem = 2 * 4 * 16 * (kK / 4 + 64);  // moe::decode_geometry's smem_up
const UpVariant kVariantsTable[] = {{"reg b6", up_k<6, 0, true>, false, 0},
                                    {"reg b6 ids", up_k<6, 0, false>, true, 0},
                                    {"bulk p2", up_k<6, 2, true>, false, kBulkSmem},
                                    {"bulk p3", up_k<6, 3, true>, false, kBulkSmem},
                                    {"bulk p2 ids", up_k<6, 2, false>, true, kBulkSmem}};
constexpr int kVariants = sizeof(kVariantsTable) / sizeof(kVariantsTable[0]);
using Variant = int;
constexpr Variant kReg6 = 0, kBulk2 = 2;
#define kNames(v) kVariantsTable[v].name

int up_blocks(int M) { return kN / 16 * M * kTopk; }
int down_blocks(int M) { return kK / 16 * M; }

bool disabled[64];

void enqueue(Variant v, int M, const Set& S, Bufs& b, cudaStream_t s, Stamps st, int layer) {
  const dim3 gu(kN / 16, M * kTopk), gd(kK / 16, M);
  const UpVariant& u = kVariantsTable[v];
  if (disabled[v]) return;
  const cudaError_t e = try_launch(u.kernel, gu, dim3(256), (size_t)u.smem, s, (const float*)S.logits,
              (const int*)(u.ids ? b.ids : nullptr), u.ids ? (int*)nullptr : b.ids,
              u.ids ? (float*)nullptr : b.wts, (const void*)S.x, (const unsigned char*)S.w13,
              (const float*)S.w13s, (void*)b.act, st, layer);
  if (e != cudaSuccess) {
    cudaFuncAttributes fa;
    cudaFuncGetAttributes(&fa, reinterpret_cast<const void*>(u.kernel));
    std::printf("variant %s: launch failed (%s), static shared memory %zu, regs %d; disabled\n",
                u.name, cudaGetErrorString(e), fa.sharedSizeBytes, fa.numRegs);
    cudaGetLastError();
    disabled[v] = true;
    return;
  }
  if (u.ids)
    launch(down_k<false, false>, gd, dim3(256), s, (const float*)S.logits, (const int*)b.ids,
           (const float*)b.wts, (int*)nullptr, (float*)nullptr, (const void*)b.act,
           (const unsigned char*)S.w2,
           (const float*)S.w2s, (void*)b.out, st, layer, up_blocks(M));
  else
    launch(u.smem > 0 ? down_k<true, true> : down_k<true, false>, gd, dim3(256), s,
           (const float*)S.logits, (const int*)nullptr, (const float*)nullptr, b.ids, b.wts,
           (const void*)b.act, (const unsigned char*)S.w2,
           (const float*)S.w2s, (void*)b.out, st, layer, up_blocks(M));
}

// Median, min and max per-layer µs over `replays` replays of a graph of R layers.
void time_variant(Variant v, int M, bool cold, Bufs& b, cudaStream_t s, FILE* log) {
  if (disabled[v]) return;
  constexpr int R = 64, kReplays = 30;
  // The ids variant reads the routing of the routed run: fill b.ids first (set 0 routing).
  cudaGraphExec_t ge = capture_graph(s, [&](cudaStream_t st) {
    for (int i = 0; i < R; ++i) enqueue(v, M, b.sets[cold ? i % kSets : 0], b, st, Stamps{}, i);
  });
  const std::vector<double> us = replay_us(ge, s, R, kReplays);
  std::printf("%-16s M=%d %s  median %7.2f us  min %7.2f  max %7.2f\n", kNames(v), M,
              cold ? "cold" : "hot ", us[us.size() / 2], us.front(), us.back());
  std::fprintf(log, "time %s M=%d %s", kNames(v), M, cold ? "cold" : "hot");
  for (double u : us) std::fprintf(log, " %.3f", u);
  std::fprintf(log, "\n");
  CK(cudaGraphExecDestroy(ge));
}

// One graph of R cold layers with stamps; per layer (relative to its first block's post-wait
// stamp): medians over layers of the up blocks' last end, the down blocks' first and last wait
// release and last end, and the next layer's start.
void timeline(Variant v, int M, bool cold, Bufs& b, cudaStream_t s, FILE* log) {
  if (disabled[v]) return;
  constexpr int R = 32;
  const int nb = up_blocks(M) + down_blocks(M), nu = up_blocks(M);
  unsigned long long* d;
  CK(cudaMalloc(&d, sizeof(unsigned long long) * R * nb * kPoints));
  CK(cudaMemset(d, 0, sizeof(unsigned long long) * R * nb * kPoints));
  Stamps st{d, nb};
  cudaGraphExec_t ge = capture_graph(s, [&](cudaStream_t stream) {
    for (int i = 0; i < R; ++i) enqueue(v, M, b.sets[cold ? i % kSets : 0], b, stream, st, i);
  });
  for (int w = 0; w < 3; ++w) CK(cudaGraphLaunch(ge, s));
  CK(cudaStreamSynchronize(s));
  std::vector<unsigned long long> h(static_cast<size_t>(R) * nb * kPoints);
  CK(cudaMemcpy(h.data(), d, h.size() * 8, cudaMemcpyDeviceToHost));
  auto at = [&](int l, int blk, int p) { return h[(static_cast<size_t>(l) * nb + blk) * kPoints + p]; };
  // Per layer: each point's median and last over the up blocks and over the down blocks,
  // relative to the layer's first up block past its wait; then the median over layers.
  struct Row { const char* name; bool up; int point; };
  const Row rows[] = {{"up past wait", true, 1},       {"up routed (warp 0)", true, 3},
                      {"up x share (warp 1)", true, 4}, {"up both in smem", true, 5},
                      {"up streamed (warp 0)", true, 6}, {"up end", true, 2},
                      {"down entry", false, 0},         {"down routed", false, 3},
                      {"down w2 issued", false, 4},     {"down released", false, 1},
                      {"down act row ready", false, 6}, {"down products done", false, 7},
                      {"down end", false, 2}};
  constexpr int kRows = sizeof(rows) / sizeof(rows[0]);
  std::vector<double> med[kRows], last[kRows], next_start;
  for (int l = 1; l + 1 < R; ++l) {
    unsigned long long t0 = ~0ull, nxt = ~0ull;
    for (int k = 0; k < nu; ++k) {
      t0 = std::min(t0, at(l, k, 1));
      nxt = std::min(nxt, at(l + 1, k, 1));
    }
    next_start.push_back((static_cast<double>(nxt) - t0) * 1e-3);
    for (int r = 0; r < kRows; ++r) {
      std::vector<double> v;
      for (int k = rows[r].up ? 0 : nu; k < (rows[r].up ? nu : nb); ++k)
        if (at(l, k, rows[r].point) != 0)
          v.push_back((static_cast<double>(at(l, k, rows[r].point)) - t0) * 1e-3);
      if (v.empty()) continue;
      std::sort(v.begin(), v.end());
      med[r].push_back(v[v.size() / 2]);
      last[r].push_back(v.back());
    }
  }
  auto median = [](std::vector<double> v) {
    if (v.empty()) return -1.0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::printf("timeline %s M=%d %s: µs from the layer's first up block past its wait, median of "
              "%d layers (per layer: median / last block)\n", kNames(v), M, cold ? "cold" : "hot", R - 2);
  for (int r = 0; r < kRows; ++r)
    std::printf("  %-22s %7.2f / %7.2f\n", rows[r].name, median(med[r]), median(last[r]));
  std::printf("  %-22s %7.2f\n", "next layer past wait", median(next_start));
  for (int l = 0; l < R; ++l)
    for (int k = 0; k < nb; ++k) {
      std::fprintf(log, "stamp %s M=%d %s layer %d block %d", kNames(v), M, cold ? "cold" : "hot", l, k);
      for (int p = 0; p < kPoints; ++p) std::fprintf(log, " %llu", at(l, k, p));
      std::fprintf(log, "\n");
    }
  CK(cudaGraphExecDestroy(ge));
  CK(cudaFree(d));
}

}  // namespace

int main(int argc, char** argv) {
  const char* log_path = argc > 1 ? argv[1] : "decode_probe.log";
  FILE* log = std::fopen(log_path, "w");
  if (!log) return 2;
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (const UpVariant& u : kVariantsTable)
    if (u.smem > 0)
      CK(cudaFuncSetAttribute(reinterpret_cast<const void*>(u.kernel),
                              cudaFuncAttributeMaxDynamicSharedMemorySize, u.smem));
  Bufs b;
  const size_t w13 = (size_t)kE * 2 * kN * kK, w2 = (size_t)kE * kK * kN;
  const size_t w13s = (size_t)kE * (2 * kN / kB) * (kK / kB), w2s = (size_t)kE * (kK / kB) * (kN / kB);
  for (int i = 0; i < kSets; ++i) {
    Set S;
    CK(cudaMalloc(&S.w13, w13));
    CK(cudaMalloc(&S.w2, w2));
    CK(cudaMalloc(&S.w13s, w13s * 4));
    CK(cudaMalloc(&S.w2s, w2s * 4));
    CK(cudaMalloc(&S.logits, (size_t)kMaxM * kE * 4));
    CK(cudaMalloc(&S.x, (size_t)kMaxM * kK * 2));
    // e4m3 bytes with the exponent's top bit and the sign bit's neighbour cleared: finite.
    fill_bytes<<<1024, 256>>>(S.w13, w13, 11u + i, 0xb7u);
    fill_bytes<<<1024, 256>>>(S.w2, w2, 97u + i, 0xb7u);
    fill_float<<<64, 256>>>(S.w13s, w13s, 5u + i, 1e-3f, 2e-3f);
    fill_float<<<64, 256>>>(S.w2s, w2s, 7u + i, 1e-3f, 2e-3f);
    fill_float<<<8, 256>>>(S.logits, (size_t)kMaxM * kE, 13u + i, -4.0f, 4.0f);
    fill_bf16<<<8, 256>>>(S.x, (size_t)kMaxM * kK, 17u + i);
    b.sets.push_back(S);
  }
  CK(cudaMalloc(&b.act, (size_t)kMaxM * kTopk * kN * 2));
  CK(cudaMalloc(&b.out, (size_t)kMaxM * kK * 2));
  CK(cudaMalloc(&b.ids, (size_t)kMaxM * kTopk * 4));
  CK(cudaMalloc(&b.wts, (size_t)kMaxM * kTopk * 4));
  CK(cudaDeviceSynchronize());

  // Sanity: every variant gives the bits of the first (the same math in the same order), on
  // every set at M = 1..4, and outputs that are mostly nonzero. Correctness against the stage kernels
  // and the fp64 reference: gpu_test_moe_decode and moetune check.
  int bad = 0;
  for (int M = 1; M <= kMaxM; ++M) {
    for (int i = 0; i < kSets; ++i) {
      std::vector<unsigned short> o[kVariants];
      for (int v = 0; v < kVariants; ++v) {  // ids variants read the routing of the run before
        o[v].resize(M * kK);
        CK(cudaMemsetAsync(b.out, 0xff, (size_t)kMaxM * kK * 2, s));
        enqueue(v, M, b.sets[i], b, s, Stamps{}, 0);
        CK(cudaMemcpyAsync(o[v].data(), b.out, M * kK * 2, cudaMemcpyDeviceToHost, s));
      }
      CK(cudaStreamSynchronize(s));
      int nz = 0;
      for (auto v : o[0]) nz += (v & 0x7fff) != 0;
      for (int v = 1; v < kVariants; ++v)
        if (!disabled[v] && std::memcmp(o[0].data(), o[v].data(), o[0].size() * 2) != 0) {
          ++bad;
          std::fprintf(log, "bad M=%d set %d variant %s\n", M, i, kNames(v));
        }
      if (nz < M * kK / 2) {
        ++bad;
        std::fprintf(log, "bad M=%d set %d (%d nonzero)\n", M, i, nz);
      }
    }
  }
  std::printf("check: every variant vs reg b6, M=1..4 x %d sets: %s (%d bad)\n", kSets,
              bad ? "FAILED" : "identical", bad);
  std::fflush(stdout);

  for (int M : {1, 2}) {
    for (bool cold : {true, false})
      for (int v = 0; v < kVariants; ++v) {
        if (kVariantsTable[v].ids) {  // ids of set 0 for every layer: hot only makes sense
          if (cold) continue;
          enqueue(kReg6, M, b.sets[0], b, s, Stamps{}, 0);
        }
        time_variant(static_cast<Variant>(v), M, cold, b, s, log);
      }
    std::fflush(stdout);
  }
  timeline(kReg6, 1, true, b, s, log);
  timeline(kBulk2, 1, true, b, s, log);
  timeline(kBulk2, 1, false, b, s, log);
  timeline(kBulk2, 2, true, b, s, log);
  std::fclose(log);
  return bad ? 1 : 0;
}
