// topk_reduce: the sum over each token's top-k slots after GEMM2 (which already multiplied
// each slot's row by its routed weight).
//
// Math: out[t, k] = Σ_{j < TOPK, topk_ids[t, j] on this rank} y[t * TOPK + j, k], fp32 sum in
// order j = 0..TOPK-1 (deterministic), rounded once to ACT; a token with no local slot gets 0.
// Pointers: y [M * TOPK, K] ACT (GEMM2's output; rows of other ranks' slots are not read);
// topk_ids [M, TOPK] int32 (global ids); out [M, K] ACT (the layer's output).
// all_local != 0: every expert is on this rank (no expert parallelism): the rows are loaded
// together with the ids, not after them (an invalid id's row, never written, is loaded and
// dropped). Grid: grid-stride over M * K / 8 eight-element vectors.
//
// A vector's TOPK row loads are issued together, before any is added: one L2 round trip per
// vector without expert parallelism, two with it. The loop this replaced loaded each row behind
// its own id's test (PTX: id j, branch, row j, id j + 1, ...).
#pragma once
#include "common/act.cuh"
#include "common/pdl.cuh"

namespace moetune {

template <int ACT,      // tile_math::kDtypeBf16 / kDtypeFp16
          int K,        // hidden size
          int TOPK,     // experts per token
          int THREADS>  // threads per block
__global__ void __launch_bounds__(THREADS)
    topk_reduce(const void* __restrict__ y, void* __restrict__ out,
                const int* __restrict__ topk_ids, long long M, int expert_start, int E,
                int all_local) {
  static_assert(K % 8 == 0, "K must be a multiple of 8 (16-byte vectors)");
  constexpr int kVecs = K / 8;
  // PDL (common/pdl.cuh): y is GEMM2's output: wait before any global access.
  // Nothing below needs the SMs to itself: the next stage may be scheduled at once.
  pdl_wait();
  pdl_launch_dependents();
  const unsigned char* yb = static_cast<const unsigned char*>(y);
  unsigned char* ob = static_cast<unsigned char*>(out);
  const long long total = M * kVecs;
  for (long long v = static_cast<long long>(blockIdx.x) * THREADS + threadIdx.x; v < total;
       v += static_cast<long long>(gridDim.x) * THREADS) {
    const long long t = v / kVecs;
    const long long k0 = (v % kVecs) * 8;
    const uint4* row = reinterpret_cast<const uint4*>(yb + (t * TOPK * K + k0) * 2);
    constexpr long long kRowVecs = K / 8;  // uint4 per row of y
    bool local[TOPK];
    uint4 raw[TOPK];
#pragma unroll
    for (int j = 0; j < TOPK; ++j)
      local[j] = static_cast<unsigned>(topk_ids[t * TOPK + j] - expert_start) <
                 static_cast<unsigned>(E);
    if (all_local) {  // every row was written (a caller's invalid id aside): no wait for the ids
#pragma unroll
      for (int j = 0; j < TOPK; ++j) raw[j] = row[j * kRowVecs];
    } else {
#pragma unroll
      for (int j = 0; j < TOPK; ++j) raw[j] = local[j] ? row[j * kRowVecs] : make_uint4(0, 0, 0, 0);
    }
    // A select, not a branch per slot: behind a branch the compiler sinks the row's load after
    // its id's test again. A skipped slot adds +0 (the sum differs only in the sign of a zero).
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#pragma unroll
    for (int j = 0; j < TOPK; ++j) {
      float f[8];
      act::load8<ACT>(&raw[j], f);
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[i] += local[j] ? f[i] : 0.0f;
    }
    act::store8<ACT>(ob + (t * K + k0) * 2, acc);
  }
}

}  // namespace moetune
