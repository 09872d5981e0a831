// moe_route_align: routing and alignment in one block, for decode sizes (few tokens): the two
// launches, and the dependency wait between them, become one. Same math and outputs as
// moe_routing (kernels/routing.cuh) followed by moe_align (kernels/moe_align.cuh): topk_ids and
// topk_weights as the routing writes them, the alignment's tables from those ids (read back from
// shared memory, not global).
//
// Pointers: those of both kernels (zero_a/zero_b as moe_align's: this call's split-K counters).
// Grid: one block of THREADS threads; warp w routes tokens w, w + THREADS/32, ...
// (M <= MAX_SLOTS / TOPK). QUANT_GROUP > 0 (block fp8): blocks 1.. quantize the hidden states
// as moe_routing's spare blocks do (kernels/routing.cuh). Shared memory: the slots' expert ids
// (MAX_SLOTS int32), the routing's group scores (THREADS/32 x E_GLOBAL fp32, N_GROUP > 1 only)
// and the alignment's tables.
#pragma once
#include "common/pdl.cuh"
#include "moe_align.cuh"
#include "routing.cuh"

namespace moetune {

template <int E_GLOBAL, int TOPK, int SCORING, int N_GROUP, int TOPK_GROUP, bool HAS_BIAS,
          bool RENORMALIZE,  // the routing's (routing.cuh)
          int BLOCK_SIZE_M,  // the alignment's padding unit (moe_align.cuh)
          int THREADS,       // the block (a multiple of 32, <= 1024)
          int MAX_E,         // bound on E (local experts) for the alignment's tables
          int MAX_SLOTS,     // bound on M * TOPK
          int ACT,           // x's type (QUANT_GROUP > 0)
          int QUANT_GROUP>   // 0, or block fp8's block_k: blocks 1.. quantize x
__global__ void __launch_bounds__(THREADS)
    moe_route_align(const float* __restrict__ router_logits,
                    const float* __restrict__ correction_bias, int* __restrict__ topk_ids,
                    float* __restrict__ topk_weights, long long M, float routed_scaling_factor,
                    int* __restrict__ sorted_token_ids, int* __restrict__ expert_ids,
                    int* __restrict__ num_tokens_post_padded, int E, int expert_start,
                    long long max_num_tokens_padded, long long max_num_m_blocks,
                    int* __restrict__ zero_a, int zero_a_n, int* __restrict__ zero_b,
                    int zero_b_n, const void* __restrict__ x, unsigned char* __restrict__ q,
                    float* __restrict__ q_scale, int cols) {
  constexpr int kWarps = THREADS / 32;
  static_assert(MAX_SLOTS >= TOPK, "MAX_SLOTS must hold one token");
  __shared__ int s_ids[MAX_SLOTS];
  __shared__ float s_choice[N_GROUP > 1 ? kWarps : 1][N_GROUP > 1 ? E_GLOBAL : 1];
  // PDL (common/pdl.cuh): as both kernels: wait before any global access.
  pdl_wait();
  pdl_launch_dependents();
  if constexpr (QUANT_GROUP > 0) {
    if (blockIdx.x > 0) {  // never reaches the alignment's __syncthreads
      quant_fp8_group_rows<ACT, QUANT_GROUP, THREADS>(x, q, q_scale, M, cols, blockIdx.x - 1,
                                                      gridDim.x - 1);
      return;
    }
  }
  zero_counters<THREADS>(zero_a, zero_a_n, zero_b, zero_b_n);  // as moe_align
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const long long num_slots = M * TOPK;  // <= MAX_SLOTS: the host launches it only then
  for (long long t = warp; t < M; t += kWarps) {
    int ids[TOPK];
    float w[TOPK];
    route_token<E_GLOBAL, TOPK, SCORING, N_GROUP, TOPK_GROUP, HAS_BIAS, RENORMALIZE>(
        router_logits + t * E_GLOBAL, correction_bias,
        N_GROUP > 1 ? s_choice[N_GROUP > 1 ? warp : 0] : nullptr, routed_scaling_factor, ids, w);
    if (lane == 0) {
#pragma unroll
      for (int k = 0; k < TOPK; ++k) {
        topk_ids[t * TOPK + k] = ids[k];
        topk_weights[t * TOPK + k] = w[k];
        s_ids[t * TOPK + k] = ids[k];
      }
    }
    __syncwarp();  // s_choice is this warp's again for its next token
  }
  __syncthreads();  // every slot's id is in s_ids
  align_block<BLOCK_SIZE_M, THREADS, MAX_E>([&](long long i) { return s_ids[i]; },
                                            sorted_token_ids, expert_ids, num_tokens_post_padded,
                                            num_slots, E, expert_start, max_num_tokens_padded,
                                            max_num_m_blocks);
}

}  // namespace moetune
