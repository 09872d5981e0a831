// moe_align: sorts the token slots by expert and pads each expert's run to a multiple of
// BLOCK_SIZE_M (SGLang/vLLM moe_align_block_size), for the experts of this rank only.
//
// Math (slot = token * topk + j, num_slots = M * topk; local expert e = topk_ids[slot] -
// expert_start, kept when 0 <= e < E, i.e. this rank holds [expert_start, expert_start + E)):
//   count[e] = |{slot : local expert e}|, padded[e] = ceil(count[e] / BLOCK_SIZE_M) * BLOCK_SIZE_M
//   offset[e] = Σ_{e' < e} padded[e'];  num_tokens_post_padded = Σ_e padded[e]
//   sorted_token_ids[offset[e] .. offset[e] + count[e]) = the slots of e (in arrival order),
//   every other entry < max_num_tokens_padded = num_slots (the padding sentinel);
//   expert_ids[b] = e for b in [offset[e], offset[e+1]) / BLOCK_SIZE_M, -1 for the blocks past
//   num_tokens_post_padded (up to max_num_m_blocks). Slots of other ranks are not emitted.
//
// Pointers: topk_ids [M, topk] int32 (global ids; routing or the caller); sorted_token_ids
// [max_num_tokens_padded] int32; expert_ids [max_num_m_blocks] int32; num_tokens_post_padded [1];
// zero_a [zero_a_n], zero_b [zero_b_n] int32 set to 0 (the GEMMs' split-K counters; n may be 0).
// Grid: one block of THREADS threads (the whole job is one histogram and one scan).
// Shared memory: count, offset, cursor: 3 x MAX_E int32 (+1), and one int32 per warp.
#pragma once
#include "common/pdl.cuh"
#include "common/warp_scan.cuh"

namespace moetune {

// Sets zero_a[0, zero_a_n) and zero_b[0, zero_b_n) to 0 with the block's threads: the split-K
// arrival counters of this call's GEMMs (FusedMoe passes them; the workspace layout moves with
// M, so they may hold another M's data), so the GEMMs need no memset.
template <int THREADS>
__device__ __forceinline__ void zero_counters(int* __restrict__ zero_a, int zero_a_n,
                                              int* __restrict__ zero_b, int zero_b_n) {
  for (int i = threadIdx.x; i < zero_a_n; i += THREADS) zero_a[i] = 0;
  for (int i = threadIdx.x; i < zero_b_n; i += THREADS) zero_b[i] = 0;
}

// The whole alignment by one block of THREADS threads (tid = threadIdx.x): `id(i)` gives the
// global expert id of slot i (topk_ids from global memory, or a copy in shared memory).
template <int BLOCK_SIZE_M, int THREADS, int MAX_E, class SlotExpert>
__device__ __forceinline__ void align_block(SlotExpert id, int* __restrict__ sorted_token_ids,
                                            int* __restrict__ expert_ids,
                                            int* __restrict__ num_tokens_post_padded,
                                            long long num_slots, int E, int expert_start,
                                            long long max_num_tokens_padded,
                                            long long max_num_m_blocks) {
  static_assert(THREADS % 32 == 0 && THREADS <= 1024, "THREADS must be a multiple of 32, <= 1024");
  static_assert(BLOCK_SIZE_M >= 1, "BLOCK_SIZE_M must be positive");
  __shared__ int s_count[MAX_E];
  __shared__ int s_offset[MAX_E + 1];
  __shared__ int s_cursor[MAX_E];
  __shared__ int s_warp[THREADS / 32];
  const int tid = threadIdx.x;

  for (int e = tid; e < E; e += THREADS) s_count[e] = 0;
  __syncthreads();
  for (long long i = tid; i < num_slots; i += THREADS) {
    const int e = id(i) - expert_start;
    if (static_cast<unsigned>(e) < static_cast<unsigned>(E)) atomicAdd(&s_count[e], 1);
  }
  __syncthreads();

  // Exclusive scan of the padded counts: thread tid owns experts [tid*per, tid*per + per).
  const int per = (E + THREADS - 1) / THREADS;
  const int e0 = tid * per;
  int local = 0;
  for (int i = 0; i < per && e0 + i < E; ++i)
    local += (s_count[e0 + i] + BLOCK_SIZE_M - 1) / BLOCK_SIZE_M * BLOCK_SIZE_M;
  const int lane = tid % 32, warp = tid / 32;
  const int incl = warp_inclusive_sum(local, lane);
  if (lane == 31) s_warp[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    const int w = warp_inclusive_sum(lane < THREADS / 32 ? s_warp[lane] : 0, lane);
    if (lane < THREADS / 32) s_warp[lane] = w;  // inclusive warp totals
  }
  __syncthreads();
  int run = (warp > 0 ? s_warp[warp - 1] : 0) + incl - local;  // exclusive prefix of this thread
  for (int i = 0; i < per && e0 + i < E; ++i) {
    s_offset[e0 + i] = run;
    s_cursor[e0 + i] = run;
    run += (s_count[e0 + i] + BLOCK_SIZE_M - 1) / BLOCK_SIZE_M * BLOCK_SIZE_M;
  }
  const int total = s_warp[THREADS / 32 - 1];
  if (tid == 0) {
    s_offset[E] = total;
    *num_tokens_post_padded = total;
  }
  __syncthreads();

  // expert_ids: block b belongs to the last expert whose offset is <= b * BLOCK_SIZE_M.
  for (long long b = tid; b < max_num_m_blocks; b += THREADS) {
    const long long pos = b * BLOCK_SIZE_M;
    int e = -1;
    if (pos < total) {
      int lo = 0, hi = E;  // s_offset[lo] <= pos < s_offset[hi]
      while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (s_offset[mid] <= pos) lo = mid; else hi = mid;
      }
      e = lo;
    }
    expert_ids[b] = e;
  }
  for (long long i = tid; i < max_num_tokens_padded; i += THREADS)
    sorted_token_ids[i] = static_cast<int>(num_slots);
  __syncthreads();  // the sentinels land before the slots that overwrite some of them
  for (long long i = tid; i < num_slots; i += THREADS) {
    const int e = id(i) - expert_start;
    if (static_cast<unsigned>(e) < static_cast<unsigned>(E))
      sorted_token_ids[atomicAdd(&s_cursor[e], 1)] = static_cast<int>(i);
  }
}

template <int BLOCK_SIZE_M,  // padding unit = the GEMM's token slots per tile
          int THREADS,       // threads of the single block (a multiple of 32, <= 1024)
          int MAX_E>         // upper bound on E (local experts) for the shared tables
__global__ void __launch_bounds__(THREADS)
    moe_align(const int* __restrict__ topk_ids, int* __restrict__ sorted_token_ids,
              int* __restrict__ expert_ids, int* __restrict__ num_tokens_post_padded,
              long long num_slots, int E, int expert_start, long long max_num_tokens_padded,
              long long max_num_m_blocks, int* __restrict__ zero_a, int zero_a_n,
              int* __restrict__ zero_b, int zero_b_n) {
  // PDL (common/pdl.cuh): topk_ids is the routing's output, and the last call's GEMMs
  // may still read the tables written here: wait before any global access.
  // Nothing below needs the SMs to itself: the next stage may be scheduled at once.
  pdl_wait();
  pdl_launch_dependents();
  zero_counters<THREADS>(zero_a, zero_a_n, zero_b, zero_b_n);
  align_block<BLOCK_SIZE_M, THREADS, MAX_E>([&](long long i) { return topk_ids[i]; },
                                            sorted_token_ids, expert_ids, num_tokens_post_padded,
                                            num_slots, E, expert_start, max_num_tokens_padded,
                                            max_num_m_blocks);
}

}  // namespace moetune
