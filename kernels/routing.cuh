// moe_routing: router logits -> top-k experts and their weights, one warp per token.
//
// Math (per token t, e < E_GLOBAL):
//   s[e] = softmax(logits[t, :])[e]  (SCORING 0)  or  sigmoid(logits[t, e])  (SCORING 1)
//   c[e] = s[e] + correction_bias[e] (HAS_BIAS) or s[e]
//   N_GROUP > 1: group g = experts [g*E/N_GROUP, (g+1)*E/N_GROUP); its score is the sum of its
//     two largest c (HAS_BIAS, DeepSeek noaux_tc) or its largest c; only the TOPK_GROUP best
//     groups stay eligible (c = -inf elsewhere).
//   selected = the TOPK largest eligible c, in descending order; a tie goes to the smaller id
//     (softmax without a bias or groups: the TOPK largest logits, which order as the fp64
//     probabilities do; the fp32 ones can differ where rounding ties them, or where expf,
//     accurate to 2 ulp, is not monotonic between neighbouring arguments).
//   topk_weights[t, j] = s[selected_j] / (RENORMALIZE ? Σ_j s[selected_j] : 1)
//                        · routed_scaling_factor
// Matches src/moe/reference.cpp route_reference (fp64) up to fp32 rounding.
//
// Pointers: router_logits [M, E_GLOBAL] fp32 (the caller's); correction_bias [E_GLOBAL] fp32
// (HAS_BIAS only); topk_ids [M, TOPK] int32, global expert ids; topk_weights [M, TOPK] fp32.
// Grid: ceil(M / WARPS) blocks of WARPS warps; warp w of block b routes token b*WARPS + w.
// QUANT_GROUP > 0 (block fp8): the blocks past those quantize the hidden states x [M, cols] ACT
// into q [M, cols] e4m3 and q_scale [M, cols / QUANT_GROUP] fp32, as quant_fp8_group does (the
// same bits): routing and quantization are independent, so the layer runs both in one launch
// (one stage boundary less: the quant stage took 1.0-1.3 µs at decode, `moetune profile`).
// Shared memory (N_GROUP > 1 only; used where a group is not a power of two of whole lanes,
// routing_detail::lanes_per_group): c of each warp's token, WARPS x E_GLOBAL fp32.
#pragma once
#include "common/pdl.cuh"
#include "quant_fp8_group.cuh"

namespace moetune {
namespace routing_detail {

// An unsigned key in the order of the floats (v not NaN; -0 and +0 get one key, as they compare
// equal), above 0: key 0 is below every float, -inf included.
__device__ __forceinline__ unsigned order_key(float v) {
  const unsigned bits = __float_as_uint(v + 0.0f);
  return bits & 0x80000000u ? ~bits : bits | 0x80000000u;
}
__device__ __forceinline__ float key_value(unsigned key) {
  return __uint_as_float(key & 0x80000000u ? key & 0x7fffffffu : ~key);
}

// Sorts n (key, id, score) triples descending by key, in place, keeping the given order among
// equal keys (odd-even transposition: n rounds, each swap only on a strictly smaller key).
template <int n>
__device__ __forceinline__ void sort_desc(unsigned (&key)[n], int (&id)[n], float (&sc)[n]) {
#pragma unroll
  for (int r = 0; r < n; ++r) {
#pragma unroll
    for (int j = r % 2; j + 1 < n; j += 2) {
      if (key[j] < key[j + 1]) {
        const unsigned k = key[j];
        key[j] = key[j + 1];
        key[j + 1] = k;
        const int i = id[j];
        id[j] = id[j + 1];
        id[j + 1] = i;
        const float f = sc[j];
        sc[j] = sc[j + 1];
        sc[j + 1] = f;
      }
    }
  }
}

// v into a running (t1 >= t2) pair of the largest values; NaN never enters (v > t fails).
__device__ __forceinline__ void top2_insert(float v, float& t1, float& t2) {
  if (v > t1) {
    t2 = t1;
    t1 = v;
  } else if (v > t2) {
    t2 = v;
  }
}

// route_token's layout: lane l holds experts kPer * l + j, j < kPer.
__host__ __device__ constexpr int experts_per_lane(int e_global) { return (e_global + 31) / 32; }

// Lanes per expert group where every group is a power of two of whole lanes (route_token's
// butterfly over them), else 0 (a scan in shared memory).
__host__ __device__ constexpr int lanes_per_group(int e_global, int n_group) {
  const int per = experts_per_lane(e_global), size = e_global / n_group;
  const int lanes = size % per == 0 ? size / per : 0;
  return lanes > 0 && lanes <= 32 && (lanes & (lanes - 1)) == 0 ? lanes : 0;
}

// One lane's experts of a row (route_token's layout; -inf past E_GLOBAL). VEC: 16-byte loads
// where the row is 16-byte aligned and a lane's share is whole vectors (Qwen3.5, DeepSeek-V3: 8
// floats in two loads; the one-warp routing chain 1224 -> 1102 cycles against scalar loads,
// decode_probe/route_picks.cu). route_token takes them for the ids alone (moe_decode_up's bulk
// path, on its critical path): with the weights, in the down kernels and the up kernels'
// register path, ptxas took 4-6 registers more for them (bf16 down 80 -> 86: 3 blocks per SM
// to 2).
template <int E_GLOBAL, bool VEC, int PER>
__device__ __forceinline__ void load_lane_row(const float* __restrict__ row, float (&s)[PER]) {
  const int e0 = PER * static_cast<int>(threadIdx.x % 32);
  const float kNegInf = -__int_as_float(0x7f800000);
  if constexpr (VEC && PER % 4 == 0 && E_GLOBAL % 4 == 0) {
    if ((reinterpret_cast<unsigned long long>(row) & 15u) == 0) {
#pragma unroll
      for (int i = 0; i < PER / 4; ++i) {
        float4 v;
        v.x = v.y = v.z = v.w = kNegInf;
        // e0 + 4i < E_GLOBAL: the whole vector is (both multiples of 4).
        if (e0 + 4 * i < E_GLOBAL) v = reinterpret_cast<const float4*>(row + e0)[i];
        s[4 * i] = v.x;
        s[4 * i + 1] = v.y;
        s[4 * i + 2] = v.z;
        s[4 * i + 3] = v.w;
      }
      return;
    }
  }
#pragma unroll
  for (int j = 0; j < PER; ++j) s[j] = e0 + j < E_GLOBAL ? row[e0 + j] : kNegInf;
}

// Softmax without a bias or groups: route_token selects on the logits (below).
template <int SCORING, int N_GROUP, bool HAS_BIAS>
inline constexpr bool kSelectsOnLogits = SCORING == 0 && !HAS_BIAS && N_GROUP == 1;

}  // namespace routing_detail

// One token's routing by one warp: every lane gets the TOPK ids (descending score) and their
// final weights (renormalized and scaled). row: the token's E_GLOBAL logits; s_choice: E_GLOBAL
// floats of shared memory of this warp (used only when N_GROUP > 1 and a group is not a power of
// two of whole lanes, routing_detail::lanes_per_group; may be nullptr otherwise). WEIGHTS false:
// the ids only (w is left as it is; the weights' work is skipped where the selection does not
// need it).
template <int E_GLOBAL, int TOPK, int SCORING, int N_GROUP, int TOPK_GROUP, bool HAS_BIAS,
          bool RENORMALIZE, bool WEIGHTS = true>
__device__ __forceinline__ void route_token(const float* __restrict__ row,
                                            const float* __restrict__ correction_bias,
                                            float* s_choice, float routed_scaling_factor,
                                            int (&ids)[TOPK], float (&w)[TOPK]) {
  // Lane l holds experts e = kPer * l + j, j < kPer (contiguous): among the lanes' heads that tie
  // in a pick, the lowest lane holds the smallest id (below).
  constexpr int kPer = routing_detail::experts_per_lane(E_GLOBAL);
  constexpr int kGroupSize = E_GLOBAL / N_GROUP;
  const float kNegInf = -__int_as_float(0x7f800000);
  static_assert(E_GLOBAL >= 1 && E_GLOBAL <= 1024, "E_GLOBAL must be in [1, 1024]");
  static_assert(TOPK >= 1 && TOPK <= E_GLOBAL, "TOPK must be in [1, E_GLOBAL]");
  static_assert(SCORING == 0 || SCORING == 1, "SCORING: 0 softmax, 1 sigmoid");
  static_assert(N_GROUP >= 1 && N_GROUP <= 32 && E_GLOBAL % N_GROUP == 0,
                "N_GROUP must divide E_GLOBAL and be <= 32");
  static_assert(N_GROUP == 1 || (TOPK_GROUP >= 1 && TOPK_GROUP <= N_GROUP &&
                                 TOPK_GROUP * kGroupSize >= TOPK),
                "TOPK_GROUP groups must hold at least TOPK experts");
  const int lane = threadIdx.x % 32;
  // Softmax without a bias or groups selects on the logits themselves: softmax is monotonic, so
  // the ids need not wait for the row's max, exps, sum and divisions (WEIGHTS false: 1527 cycles
  // of one warp per token instead of 2455, on moe_decode_up's critical path before its first
  // weight copy; bench/results/2026-12-02_h200_eighteenth_session.md). The order can differ from
  // the fp32 probabilities' only where rounding ties two of them or reverses a pair an ulp apart
  // (expf is accurate to 2 ulp, not monotonic by contract): the larger logit wins, as in the fp64
  // reference. The weights are computed as before, the same bits.
  constexpr bool kOnLogits = routing_detail::kSelectsOnLogits<SCORING, N_GROUP, HAS_BIAS>;
  float s[kPer], c[kPer];
  routing_detail::load_lane_row<E_GLOBAL, !WEIGHTS>(row, s);
  bool poisoned = false;  // kOnLogits: the row's fp32 softmax is NaN everywhere
  if constexpr (kOnLogits) {
    // A NaN or +inf logit, or a row of -inf, makes the softmax NaN everywhere (NaN - mx,
    // inf - inf, -inf - -inf): every score then loses and the picks are experts 0..TOPK-1 with
    // NaN weights, as where the probabilities are selected on, and in route_reference.
    bool bad = false, all_masked = true;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      c[j] = s[j];
      if (kPer * lane + j < E_GLOBAL) {
        bad |= s[j] != s[j] || s[j] == -kNegInf;
        all_masked &= s[j] == kNegInf;
      }
    }
    poisoned = __any_sync(0xffffffffu, bad) || __all_sync(0xffffffffu, all_masked);
  }
  if constexpr (!kOnLogits || WEIGHTS) {
    if constexpr (SCORING == 0) {
      float mx = kNegInf;  // fmaxf drops NaN logits
#pragma unroll
      for (int j = 0; j < kPer; ++j) mx = fmaxf(mx, s[j]);
      mx = routing_detail::key_value(
          __reduce_max_sync(0xffffffffu, routing_detail::order_key(mx)));  // one redux
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        s[j] = kPer * lane + j < E_GLOBAL ? expf(s[j] - mx) : 0.0f;
        sum += s[j];
      }
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
#pragma unroll
      for (int j = 0; j < kPer; ++j) s[j] /= sum;
    } else {
#pragma unroll
      for (int j = 0; j < kPer; ++j)
        s[j] = kPer * lane + j < E_GLOBAL ? 1.0f / (1.0f + expf(-s[j])) : 0.0f;
    }
  }
  if constexpr (!kOnLogits) {
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int e = kPer * lane + j;
      c[j] = e < E_GLOBAL ? (HAS_BIAS ? s[j] + correction_bias[e] : s[j]) : kNegInf;
    }
  }

  if constexpr (N_GROUP > 1) {
    // Each group's score in every lane: gs[g] = its two largest c summed (HAS_BIAS, DeepSeek
    // noaux_tc) or its largest, NaN never entering (v > top fails) and an inf + -inf sum counting
    // as -inf. Then a group is kept when fewer than TOPK_GROUP groups beat it (a larger score, or
    // an equal one and a smaller id), as route_reference's top_indices keeps them: exactly
    // TOPK_GROUP groups, also when several score -inf. (TOPK_GROUP argmax rounds that set the
    // winner's score to -inf kept a group twice once only -inf groups were left: fewer groups,
    // other experts than the reference's.)
    float gs[N_GROUP];
    constexpr int kLanesPerGroup = routing_detail::lanes_per_group(E_GLOBAL, N_GROUP);
    if constexpr (kLanesPerGroup > 0) {
      // Groups of whole lanes, a power of two of them (DeepSeek-V3: 8 groups of 32 experts, 4
      // lanes each): each lane's top two, a butterfly over its group's lanes merging (top1 >=
      // top2) pairs, then every lane takes each group's score from the group's first lane. (With
      // e = lane + 32 j it was a 5-step butterfly per group, 80 shuffles.)
      float t1 = kNegInf, t2 = kNegInf;
#pragma unroll
      for (int j = 0; j < kPer; ++j) routing_detail::top2_insert(c[j], t1, t2);
#pragma unroll
      for (int off = kLanesPerGroup / 2; off > 0; off >>= 1) {
        const float o1 = __shfl_xor_sync(0xffffffffu, t1, off);
        const float o2 = __shfl_xor_sync(0xffffffffu, t2, off);
        if (o1 > t1) {
          t2 = fmaxf(t1, o2);
          t1 = o1;
        } else {
          t2 = fmaxf(t2, o1);
        }
      }
      const float gscore = (HAS_BIAS && kGroupSize > 1) ? t1 + t2 : t1;
#pragma unroll
      for (int g = 0; g < N_GROUP; ++g)
        gs[g] = __shfl_sync(0xffffffffu, gscore, g * kLanesPerGroup);
    } else {
      // Other group shapes: lane g < N_GROUP scans group g in shared memory, then every lane
      // takes every group's score.
#pragma unroll
      for (int j = 0; j < kPer; ++j)
        if (kPer * lane + j < E_GLOBAL) s_choice[kPer * lane + j] = c[j];
      __syncwarp();
      float gscore = kNegInf;
      if (lane < N_GROUP) {
        float top1 = kNegInf, top2 = kNegInf;
        for (int i = 0; i < kGroupSize; ++i)
          routing_detail::top2_insert(s_choice[lane * kGroupSize + i], top1, top2);
        gscore = (HAS_BIAS && kGroupSize > 1) ? top1 + top2 : top1;
      }
#pragma unroll
      for (int g = 0; g < N_GROUP; ++g) gs[g] = __shfl_sync(0xffffffffu, gscore, g);
    }
    unsigned keep = 0;
#pragma unroll
    for (int g = 0; g < N_GROUP; ++g) {
      if (gs[g] != gs[g]) gs[g] = kNegInf;
    }
#pragma unroll
    for (int g = 0; g < N_GROUP; ++g) {
      int beaten_by = 0;
#pragma unroll
      for (int h = 0; h < N_GROUP; ++h)
        beaten_by += (gs[h] > gs[g] || (gs[h] == gs[g] && h < g)) ? 1 : 0;
      if (beaten_by < TOPK_GROUP) keep |= 1u << g;
    }
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int e = kPer * lane + j;
      if (e < E_GLOBAL && !((keep >> (e / kGroupSize)) & 1u)) c[j] = kNegInf;
    }
  }

  // Every id is a real expert, also when scores are NaN or -inf (a NaN logit, a masked expert):
  // among the experts not yet taken, the highest choice score wins, NaN counting as -inf and
  // the smaller id winning ties. (It once kept the sentinel 0x7fffffff when no score beat -inf;
  // the alignment then dropped the slot, and GEMM2's folded top-k sum would wait for it.)
  // Each lane sorts its experts by key (ids ascending among equal keys; key 0 past E_GLOBAL, below
  // -inf); a pick is then the largest head over the warp: one redux and a ballot, the lowest lane
  // whose head ties the largest winning (it holds the smallest id: a lane's experts are
  // contiguous), and the winner drops its head. The winner's id and score wait in a register of
  // its own and are gathered after the loop (a redux OR each: every other lane holds 0), off the
  // picks' chain of dependent warp operations. The ballot is every lane's: a lane that skipped it
  // (in an && operand) made the routing kernel fault with an illegal instruction. One warp, row
  // in L1 (decode_probe/route_latency.cu): Qwen3.5's ids alone 1527 -> 1179 cycles, with the
  // weights 2559 -> 2279, DeepSeek-V3 4343 -> 3516 (its groups as well, above), against the picks
  // with a shuffle each and a second redux on tied heads, e = lane + 32 j
  // (bench/results/2026-12-02_h200_nineteenth_session.md). It was a scan of the lane's kPer
  // scores per pick, ~1.5 µs of one warp at 256 experts, before that (tenth session).
  unsigned key[kPer];
  int id[kPer];
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int e = kPer * lane + j;
    key[j] = e < E_GLOBAL ? routing_detail::order_key(c[j] == c[j] ? c[j] : kNegInf) : 0u;
    id[j] = e;
  }
  routing_detail::sort_desc(key, id, s);
  constexpr bool kPickWeights = !kOnLogits || WEIGHTS;
  const unsigned lower_lanes = (1u << lane) - 1u;
  unsigned pick_id[TOPK], pick_w[kPickWeights ? TOPK : 1];
#pragma unroll
  for (int k = 0; k < TOPK; ++k) {
    const unsigned best = __reduce_max_sync(0xffffffffu, key[0]);
    const bool head = key[0] == best;
    const unsigned tied = __ballot_sync(0xffffffffu, head);  // every lane: not in a && operand
    const bool me = head && (tied & lower_lanes) == 0;
    pick_id[k] = me ? static_cast<unsigned>(id[0]) : 0u;
    if constexpr (kPickWeights) pick_w[k] = me ? __float_as_uint(s[0]) : 0u;
#pragma unroll
    for (int j = 0; j + 1 < kPer; ++j) {
      key[j] = me ? key[j + 1] : key[j];
      id[j] = me ? id[j + 1] : id[j];
      if constexpr (kPickWeights) s[j] = me ? s[j + 1] : s[j];
    }
    if (me) key[kPer - 1] = 0u;  // the id and score left there never win: key 0 is below -inf
  }
  float wsum = 0.0f;
#pragma unroll
  for (int k = 0; k < TOPK; ++k) {
    ids[k] = static_cast<int>(__reduce_or_sync(0xffffffffu, pick_id[k]));
    if constexpr (kPickWeights) {
      w[k] = __uint_as_float(__reduce_or_sync(0xffffffffu, pick_w[k]));
      wsum += w[k];
    }
  }
  if constexpr (kOnLogits) {
    if (poisoned) {  // the weights are NaN already
#pragma unroll
      for (int k = 0; k < TOPK; ++k) ids[k] = k;
    }
  }
  if constexpr (kPickWeights) {
    const float norm = RENORMALIZE ? routed_scaling_factor / wsum : routed_scaling_factor;
#pragma unroll
    for (int k = 0; k < TOPK; ++k) w[k] *= norm;
  }
}

// The weights of picks that route_token<..., WEIGHTS = false> made where it selects on the logits
// (routing_detail::kSelectsOnLogits), the same bits as its own, lane k < TOPK returning pick k's:
// the row is read again (L1) for the max and the sum, one division per lane, the renormalizing
// sum in pick order. For moe_decode_down, which needs them only after its w2 preloads are issued.
template <int E_GLOBAL, int TOPK, bool RENORMALIZE>
__device__ __forceinline__ float softmax_weight_of_pick(const float* __restrict__ row, int id,
                                                        float routed_scaling_factor) {
  constexpr int kPer = routing_detail::experts_per_lane(E_GLOBAL);  // route_token's layout
  static_assert(TOPK <= 32, "one lane per pick");
  const float kNegInf = -__int_as_float(0x7f800000);
  const int lane = threadIdx.x % 32;
  float mx = kNegInf;  // as route_token: fmaxf drops NaN logits, one redux
#pragma unroll
  for (int j = 0; j < kPer; ++j)
    if (kPer * lane + j < E_GLOBAL) mx = fmaxf(mx, row[kPer * lane + j]);
  mx = routing_detail::key_value(__reduce_max_sync(0xffffffffu, routing_detail::order_key(mx)));
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < kPer; ++j)
    sum += kPer * lane + j < E_GLOBAL ? expf(row[kPer * lane + j] - mx) : 0.0f;
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  const float w = lane < TOPK ? expf(row[id] - mx) / sum : 0.0f;
  float wsum = 0.0f;
#pragma unroll
  for (int k = 0; k < TOPK; ++k) wsum += __shfl_sync(0xffffffffu, w, k);
  return w * (RENORMALIZE ? routed_scaling_factor / wsum : routed_scaling_factor);
}

template <int E_GLOBAL,     // experts in the model (router width), <= 1024
          int TOPK,         // experts per token
          int SCORING,      // 0: softmax, 1: sigmoid
          int N_GROUP,      // expert groups (1: no grouping), <= 32
          int TOPK_GROUP,   // groups kept per token (N_GROUP > 1)
          bool HAS_BIAS,    // add correction_bias to the selection score
          bool RENORMALIZE, // divide the selected weights by their sum
          int WARPS,        // tokens per block
          int ACT,          // tile_math::kDtypeBf16 / kDtypeFp16: x's type (QUANT_GROUP > 0)
          int QUANT_GROUP>  // 0, or block fp8's block_k: the spare blocks quantize x
__global__ void __launch_bounds__(WARPS * 32)
    moe_routing(const float* __restrict__ router_logits, const float* __restrict__ correction_bias,
                int* __restrict__ topk_ids, float* __restrict__ topk_weights, long long M,
                float routed_scaling_factor, const void* __restrict__ x,
                unsigned char* __restrict__ q, float* __restrict__ q_scale, int cols,
                int* __restrict__ zero, int zero_n, uint4* __restrict__ zero_vec,
                long long zero_vecs) {
  __shared__ float s_choice[N_GROUP > 1 ? WARPS : 1][N_GROUP > 1 ? E_GLOBAL : 1];

  // PDL (common/pdl.cuh): router_logits may come from the kernel before, and the last
  // call's stages may still read topk_ids: wait before any global access.
  // Nothing below needs the SMs to itself: the next stage may be scheduled at once.
  pdl_wait();
  pdl_launch_dependents();
  // zero_n int32 a later kernel needs zero (a GEMM's counters where no alignment launch runs,
  // which would zero them); the later kernel's PDL wait covers this whole grid.
  if (blockIdx.x == 0)
    for (int i = threadIdx.x; i < zero_n; i += WARPS * 32) zero[i] = 0;
  // zero_vecs 16-byte vectors a later kernel adds into (the sliced GEMM kernel's out), shared by
  // every block: stores only, so the routing's own path barely moves.
  for (long long v = static_cast<long long>(blockIdx.x) * (WARPS * 32) + threadIdx.x;
       v < zero_vecs; v += static_cast<long long>(gridDim.x) * (WARPS * 32))
    zero_vec[v] = make_uint4(0, 0, 0, 0);
  const long long route_blocks = (M + WARPS - 1) / WARPS;
  if constexpr (QUANT_GROUP > 0) {
    if (blockIdx.x >= route_blocks) {
      quant_fp8_group_rows<ACT, QUANT_GROUP, WARPS * 32>(x, q, q_scale, M, cols,
                                                         blockIdx.x - route_blocks,
                                                         gridDim.x - route_blocks);
      return;
    }
  }
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const long long t = static_cast<long long>(blockIdx.x) * WARPS + warp;
  if (t >= M) return;  // the whole warp leaves together
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
    }
  }
}

}  // namespace moetune
