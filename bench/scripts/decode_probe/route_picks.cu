// Device probe (bench/PENDING.md item 3, the routing's picks): where the ~1500 cycles of
// route_token's ids-only top-8 over 256 logits go (one warp, row in L1), and what other pick
// loops cost. Variants, all the same selection (descending logit, smaller id on ties):
//   main    route_token<256, 8, softmax, ..., WEIGHTS = false> as moe_decode_up's bulk path
//           (kernels/routing.cuh as built: main's when call 2 of the nineteenth session ran it,
//           the change it led to in call 5, which is v4 with the weights' registers)
//   v1      expert e = lane + 32 j (main's layout); per pick redux + ballot (+ a min redux
//           when heads tie), the winning lane's id kept in a register and gathered after
//           the loop (no shuffle per pick)
//   v2      e = 8 lane + j (a lane's experts contiguous): among tied heads the lowest lane
//           holds the smallest id, so the winner is the lowest lane of the ballot
//   v4      v2 with two 16-byte loads per lane
//   v3      as v2 without the ballot on the path: every lane whose head is the max drops it
//           (wrong when heads tie; counted), a lower bound
//   sortN   main's per-lane sort alone / the row load alone (no picks)
// Each prints cycles per call (clock64) of a chain of calls (the next row depends on the
// previous ids) and the count of rows where its ids differ from main's, on random rows and on
// rows with many ties (logits on a grid of 1/8).
// v1..v4 take the ballot outside any && operand: every lane must execute it (a lane that skips a
// full-mask warp vote is an illegal instruction or a hang).
// Standalone: nvcc -std=c++17 -O3 -I kernels -gencode arch=compute_90a,code=sm_90a
//   -Xcompiler "-static-libstdc++ -static-libgcc" -o .devbin/route_picks
//   bench/scripts/decode_probe/route_picks.cu ; run: .devbin/route_picks
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>

#include "graph_timing.cuh"
#include "routing.cuh"

namespace {
using namespace moetune;
constexpr int kRows = 64, kE = 256, kK = 8, kPer = 8, kReps = 2000;

__device__ __forceinline__ void sort_keys(unsigned (&key)[kPer], int (&id)[kPer]) {
#pragma unroll
  for (int r = 0; r < kPer; ++r) {
#pragma unroll
    for (int j = r % 2; j + 1 < kPer; j += 2) {
      if (key[j] < key[j + 1]) {
        const unsigned k = key[j];
        key[j] = key[j + 1];
        key[j + 1] = k;
        const int i = id[j];
        id[j] = id[j + 1];
        id[j + 1] = i;
      }
    }
  }
}

__device__ __forceinline__ void shift(bool me, unsigned (&key)[kPer], int (&id)[kPer]) {
#pragma unroll
  for (int j = 0; j + 1 < kPer; ++j) {
    key[j] = me ? key[j + 1] : key[j];
    id[j] = me ? id[j + 1] : id[j];
  }
  key[kPer - 1] = me ? 0u : key[kPer - 1];
}

// VARIANT: 1, 2, 3 as above; 10 sort only (interleaved), 11 load only.
template <int VARIANT>
__device__ __forceinline__ void route(const float* __restrict__ row, int (&ids)[kK]) {
  const int lane = threadIdx.x % 32;
  constexpr bool kContig = VARIANT == 2 || VARIANT == 3 || VARIANT == 4;
  float s[kPer];
  if constexpr (VARIANT == 4) {  // two 16-byte loads per lane
    const float4 a = reinterpret_cast<const float4*>(row)[2 * lane];
    const float4 b = reinterpret_cast<const float4*>(row)[2 * lane + 1];
    s[0] = a.x; s[1] = a.y; s[2] = a.z; s[3] = a.w;
    s[4] = b.x; s[5] = b.y; s[6] = b.z; s[7] = b.w;
  } else {
#pragma unroll
    for (int j = 0; j < kPer; ++j) s[j] = row[kContig ? kPer * lane + j : lane + 32 * j];
  }
  const float kNegInf = -__int_as_float(0x7f800000);
  bool bad = false, all_masked = true;
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    bad |= s[j] != s[j] || s[j] == -kNegInf;
    all_masked &= s[j] == kNegInf;
  }
  const bool poisoned = __any_sync(0xffffffffu, bad) || __all_sync(0xffffffffu, all_masked);
  unsigned key[kPer];
  int id[kPer];
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    key[j] = routing_detail::order_key(s[j]);
    id[j] = kContig ? kPer * lane + j : lane + 32 * j;
  }
  if constexpr (VARIANT == 11) {
#pragma unroll
    for (int k = 0; k < kK; ++k) ids[k] = static_cast<int>(key[k] & 255u);
    return;
  }
  sort_keys(key, id);
  if constexpr (VARIANT == 10) {
#pragma unroll
    for (int k = 0; k < kK; ++k) ids[k] = id[k] ^ static_cast<int>(key[k] & 1u);
    return;
  }
  unsigned pick[kK];
  unsigned ties = 0;
#pragma unroll
  for (int k = 0; k < kK; ++k) {
    const unsigned best = __reduce_max_sync(0xffffffffu, key[0]);
    bool me;
    if constexpr (VARIANT == 1) {
      const unsigned tied = __ballot_sync(0xffffffffu, key[0] == best);
      int from = __ffs(tied) - 1;
      if (tied & (tied - 1))
        from = static_cast<int>(__reduce_min_sync(
                   0xffffffffu, key[0] == best ? static_cast<unsigned>(id[0]) : 0xffffffffu)) % 32;
      me = lane == from;
    } else if constexpr (VARIANT == 2 || VARIANT == 4) {
      const bool b = key[0] == best;
      const unsigned tied = __ballot_sync(0xffffffffu, b);
      me = b && (tied & ((1u << lane) - 1u)) == 0;
    } else {
      me = key[0] == best;
      const unsigned bl = __ballot_sync(0xffffffffu, me);
      ties |= bl & (bl - 1u);
    }
    pick[k] = me ? static_cast<unsigned>(id[0]) : 0u;
    shift(me, key, id);
  }
#pragma unroll
  for (int k = 0; k < kK; ++k) ids[k] = static_cast<int>(__reduce_or_sync(0xffffffffu, pick[k]));
  if (VARIANT == 3 && ties) ids[0] = -1 - ids[0];  // counted as a mismatch
  if (poisoned) {
#pragma unroll
    for (int k = 0; k < kK; ++k) ids[k] = k;
  }
}

template <int VARIANT>
__device__ __forceinline__ void route_any(const float* row, int (&ids)[kK]) {
  if constexpr (VARIANT == 0) {
    float w[kK];
    route_token<kE, kK, 0, 1, 1, false, true, false>(row, nullptr, nullptr, 1.0f, ids, w);
  } else {
    route<VARIANT>(row, ids);
  }
}

template <int VARIANT>
__global__ void chain(const float* logits, long long* out) {
  const float* row = logits;
  int acc = 0;
  const long long c0 = clock64();
  for (int r = 0; r < kReps; ++r) {
    int ids[kK];
    route_any<VARIANT>(row, ids);
    acc += ids[kK - 1];
    row = logits + static_cast<long long>((ids[0] + r) % kRows) * kE;
  }
  const long long c1 = clock64();
  if (threadIdx.x == 0) {
    out[0] = c1 - c0;
    out[1] = acc;
  }
}

// ids of every row by VARIANT, one warp per row.
template <int VARIANT>
__global__ void all_rows(const float* logits, int* ids_out) {
  int ids[kK];
  route_any<VARIANT>(logits + static_cast<long long>(blockIdx.x) * kE, ids);
  if (threadIdx.x < kK) {
#pragma unroll
    for (int k = 0; k < kK; ++k)
      if (k == static_cast<int>(threadIdx.x)) ids_out[blockIdx.x * kK + k] = ids[k];
  }
}

__global__ void fill(float* p, int n, unsigned seed, float grid) {
  for (int i = threadIdx.x + blockIdx.x * blockDim.x; i < n; i += blockDim.x * gridDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed;
    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
    float v = -4.0f + 8.0f * (h >> 8) * (1.0f / 16777216.0f);
    p[i] = grid > 0.0f ? rintf(v * grid) / grid : v;
  }
}

int ref[2][kRows * kK];  // main's ids (run<0> first), random and tied rows

template <int VARIANT>
void run(const char* name, const float* logits, const float* tied, long long* d, int* ids) {
  long long h[2];
  for (int rep = 0; rep < 3; ++rep) {  // the last of 3 (the first warms the instruction cache)
    chain<VARIANT><<<1, 32>>>(logits, d);
    CK(cudaGetLastError());
    CK(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
  }
  int got[kRows * kK];
  int diff[2] = {0, 0};
  for (int set = 0; set < 2; ++set) {
    all_rows<VARIANT><<<kRows, 32>>>(set ? tied : logits, ids);
    CK(cudaMemcpy(got, ids, sizeof(got), cudaMemcpyDeviceToHost));
    if (VARIANT == 0) std::memcpy(ref[set], got, sizeof(got));
    for (int r = 0; r < kRows; ++r)
      for (int k = 0; k < kK; ++k)
        if (got[r * kK + k] != ref[set][r * kK + k]) {
          ++diff[set];
          break;
        }
  }
  std::printf("%-40s %7.0f cycles per call   rows differing from main: %d random, %d tied\n",
              name, double(h[0]) / kReps, diff[0], diff[1]);
}
}  // namespace

int main() {
  float *logits, *tied;
  long long* d;
  int* ids;
  CK(cudaMalloc(&logits, sizeof(float) * kRows * kE));
  CK(cudaMalloc(&tied, sizeof(float) * kRows * kE));
  CK(cudaMalloc(&d, sizeof(long long) * 2));
  CK(cudaMalloc(&ids, sizeof(int) * kRows * kK));
  fill<<<16, 256>>>(logits, kRows * kE, 7u, 0.0f);
  fill<<<16, 256>>>(tied, kRows * kE, 7u, 8.0f);
  CK(cudaDeviceSynchronize());
  run<0>("main (ids only, softmax e256 top8)", logits, tied, d, ids);
  run<1>("v1 interleaved, ids after the loop", logits, tied, d, ids);
  run<2>("v2 contiguous, lowest tied lane", logits, tied, d, ids);
  run<4>("v4 = v2 with 16-byte row loads", logits, tied, d, ids);
  run<3>("v3 contiguous, no ballot (bound)", logits, tied, d, ids);
  run<10>("load + poison + keys + sort only", logits, tied, d, ids);
  run<11>("load + poison + keys only", logits, tied, d, ids);
  return 0;
}
