// silu_mul: the activation between the two GEMMs, SiLU(gate) · up, per token slot.
//
// Math: out[slot, n] = silu(h[slot, n]) · h[slot, N + n], silu(x) = x / (1 + exp(-x)), in fp32,
// rounded once to ACT; rows of slots whose expert is not on this rank (topk_ids[slot] -
// expert_start outside [0, E)) are written as zeros (GEMM1 left them unwritten, and the
// per-tensor fp8 amax must not see them).
// Pointers: h [num_slots, 2N] ACT (GEMM1's output, rows 0..N-1 of w13 = gate, N..2N-1 = up);
// out [num_slots, N] ACT (GEMM2's input, or the fp8 quantization's); topk_ids [num_slots] int32.
// Grid: grid-stride over num_slots * N / 8 eight-element vectors (16-byte accesses).
#pragma once
#include "common/act.cuh"
#include "common/pdl.cuh"

namespace moetune {

template <int ACT,      // tile_math::kDtypeBf16 / kDtypeFp16
          int N,        // per-rank expert intermediate size
          int THREADS>  // threads per block
__global__ void __launch_bounds__(THREADS)
    silu_mul(const void* __restrict__ h, void* __restrict__ out, const int* __restrict__ topk_ids,
             long long num_slots, int expert_start, int E) {
  static_assert(N % 8 == 0, "N must be a multiple of 8 (16-byte vectors)");
  constexpr int kVecs = N / 8;  // vectors per row
  // PDL (common/pdl.cuh): h is GEMM1's output: wait before any global access.
  // Nothing below needs the SMs to itself: the next stage may be scheduled at once.
  pdl_wait();
  pdl_launch_dependents();
  const unsigned char* hb = static_cast<const unsigned char*>(h);
  unsigned char* ob = static_cast<unsigned char*>(out);
  const long long total = num_slots * kVecs;
  for (long long v = static_cast<long long>(blockIdx.x) * THREADS + threadIdx.x; v < total;
       v += static_cast<long long>(gridDim.x) * THREADS) {
    const long long slot = v / kVecs;
    const long long n0 = (v % kVecs) * 8;
    float r[8];
    const int e = topk_ids[slot] - expert_start;
    if (static_cast<unsigned>(e) < static_cast<unsigned>(E)) {
      float g[8], u[8];
      act::load8<ACT>(hb + (slot * 2 * N + n0) * 2, g);
      act::load8<ACT>(hb + (slot * 2 * N + N + n0) * 2, u);
#pragma unroll
      for (int i = 0; i < 8; ++i) r[i] = act::silu_mul(g[i], u[i]);
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) r[i] = 0.0f;
    }
    act::store8<ACT>(ob + (slot * N + n0) * 2, r);
  }
}

}  // namespace moetune
