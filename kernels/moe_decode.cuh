// The decode kernels: the whole MoE layer in two launches for a few tokens (M <= 4), where the
// staged pipeline (routing+align, GEMM1, SiLU·up, GEMM2, top-k sum: five launches at M = 1) costs
// one stage boundary (1-2.5 µs on the H200, `moetune profile`) per stage on top of streaming the
// active experts' weights once. Each GEMM is a GEMV per slot on the CUDA cores: with one token
// per expert a tensor-core tile is 1/16 full, and the layer is bound by the weight bytes.
//
//   moe_decode_up    grid (N / NC, M * TOPK): block (c, slot) routes its slot's token (one warp;
//                    the others load, and for fp8 quantize, the token's hidden state into shared
//                    memory), then computes gate and up for columns [c*NC, (c+1)*NC) of its
//                    expert and writes SiLU(gate)·up as ACT into act [M*TOPK, N].
//   moe_decode_down  grid (K / HC, M): block (c, t) routes token t again (same code and inputs:
//                    the same ids and weights) and loads its w2 rows [c*HC, (c+1)*HC) of every
//                    local slot into registers BEFORE waiting for moe_decode_up (PDL: weights
//                    and router logits are not moe_decode_up's outputs), then reads act (for
//                    fp8 quantizing it per token per BK columns), and writes
//                    out[t, h] = Σ_j round(w_j · Σ_n act[t*TOPK + j, n] · w2[e_j, h, n]).
//
// Math, as the staged pipeline up to fp32 summation order: fp8 block-wise quantizes x and act as
// quant_fp8_group does (the same bits for the same input), rounds gate and up to ACT before SiLU
// (GEMM1's h is ACT there), rounds act to ACT, and rounds each slot's product (GEMM2's y) to ACT
// before the fp32 sum over j = 0..TOPK-1 in order (topk_reduce). The products use the dequantized
// values: Σ_k w_q · (q_x · s_x) · s_w per BK block, where the GEMM scales the block sum of w_q·q_x.
// Slots whose expert is not on this rank add nothing; a token without a local slot gets 0.
//
// Pointers: router_logits [M, E_GLOBAL] fp32 (ROUTE) or topk_ids_in / topk_weights_in [M, TOPK]
// (precomputed); correction_bias [E_GLOBAL] fp32 (HAS_BIAS); x [M, K] ACT; w13 [E, 2N, K] and
// w2 [E, K, N] (e4m3 bytes for WFP8, else ACT); w13_scale [E, 2N/BN, K/BK] and w2_scale
// [E, K/BN, N/BK] fp32 (WFP8); act [M*TOPK, N] ACT (workspace); topk_ids_out/topk_weights_out
// [M, TOPK] (moe_decode_up with ROUTE writes them, for checks and callers); out [M, K] ACT.
// Shared memory: moe_decode_up K + 2*NC floats (+ E_GLOBAL for grouped routing),
// moe_decode_down TOPK*N floats (+ E_GLOBAL): the host keeps both within 48 KB
// (src/moe/decode.hpp decode_kernels_fit).
#pragma once
#include <cuda_fp8.h>

#include "common/act.cuh"
#include "common/pdl.cuh"
#include "routing.cuh"

namespace moetune {
namespace decode_detail {

__host__ __device__ constexpr int chunk_vectors(int nv, int rows) {
  return nv * rows <= 16 ? nv : (16 / rows > 1 ? 16 / rows : 1);
}

// Σ of one 16-byte weight vector (16 e4m3 or 8 ACT elements) times the floats x[0..]. x is read
// as float4 pieces starting at piece `rot` (mod the piece count): lanes a bank cycle apart
// (a lane's x is 64 or 32 bytes past its neighbour's) start on different pieces, so a warp's
// shared-memory reads are free of bank conflicts (4-way and 2-way otherwise).
template <bool WFP8, int ACT>
__device__ __forceinline__ float dot_vec(const uint4& w, const float* x, int rot) {
  constexpr int kPieces = WFP8 ? 4 : 2;  // float4s of x per vector
  float acc = 0.0f;
#pragma unroll
  for (int i = 0; i < kPieces; ++i) {
    const int p = (i + rot) % kPieces;
    const float4 xv = *reinterpret_cast<const float4*>(x + 4 * p);
    if constexpr (WFP8) {
      const unsigned word = p == 0 ? w.x : p == 1 ? w.y : p == 2 ? w.z : w.w;
      const __half2_raw lo = __nv_cvt_fp8x2_to_halfraw2(
          static_cast<__nv_fp8x2_storage_t>(word & 0xffffu), __NV_E4M3);
      const __half2_raw hi =
          __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(word >> 16), __NV_E4M3);
      const float2 a = __half22float2(__half2(lo)), b = __half22float2(__half2(hi));
      acc = fmaf(a.x, xv.x, acc);
      acc = fmaf(a.y, xv.y, acc);
      acc = fmaf(b.x, xv.z, acc);
      acc = fmaf(b.y, xv.w, acc);
    } else {
      const unsigned w0 = p == 0 ? w.x : w.z, w1 = p == 0 ? w.y : w.w;
      float2 a, b;
      if constexpr (ACT == tile_math::kDtypeFp16) {
        a = __half22float2(*reinterpret_cast<const __half2*>(&w0));
        b = __half22float2(*reinterpret_cast<const __half2*>(&w1));
      } else {
        a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&w0));
        b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&w1));
      }
      acc = fmaf(a.x, xv.x, acc);
      acc = fmaf(a.y, xv.y, acc);
      acc = fmaf(b.x, xv.z, acc);
      acc = fmaf(b.y, xv.w, acc);
    }
  }
  return acc;
}

// dot_vec's starting piece for lane-in-row sl: lanes sharing a bank cycle start apart.
template <bool WFP8>
__device__ __forceinline__ int piece_rotation(int sl) {
  constexpr int kPieces = WFP8 ? 4 : 2;
  return (sl / (8 / kPieces)) % kPieces;
}

__device__ __forceinline__ uint4 ldg_stream(const unsigned char* p) {
  // Weights are read once per call: keep them out of L1.
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

template <int ACT>
__device__ __forceinline__ float round_act(float v) {
  if constexpr (ACT == tile_math::kDtypeFp16) {
    return __half2float(__float2half_rn(v));
  } else {
    return __bfloat162float(__float2bfloat16_rn(v));
  }
}

template <int ACT>
__device__ __forceinline__ float load_act(const void* base, long long i) {
  const unsigned short bits = static_cast<const unsigned short*>(base)[i];
  if constexpr (ACT == tile_math::kDtypeFp16) {
    return __half2float(__ushort_as_half(bits));
  } else {
    return __bfloat162float(__ushort_as_bfloat16(bits));
  }
}

template <int ACT>
__device__ __forceinline__ void store_act(void* base, long long i, float v) {
  unsigned short bits;
  if constexpr (ACT == tile_math::kDtypeFp16) {
    bits = __half_as_ushort(__float2half_rn(v));
  } else {
    bits = __bfloat16_as_ushort(__float2bfloat16_rn(v));
  }
  static_cast<unsigned short*>(base)[i] = bits;
}

// `cols` (a multiple of 8) ACT values at src into dst as floats, by threads [tid0, tid0 + n) of
// the block: every 16-byte load is issued before the first is used (one memory round trip).
template <int ACT>
__device__ __forceinline__ void load_floats(const void* __restrict__ src, float* dst, int cols,
                                            int tid, int n) {
  const unsigned char* b = static_cast<const unsigned char*>(src);
  for (int v = tid; v < cols / 8; v += 4 * n) {
    float f[4][8];
#pragma unroll
    for (int u = 0; u < 4; ++u)
      if (v + u * n < cols / 8) act::load8<ACT>(b + (v + u * n) * 16, f[u]);
#pragma unroll
    for (int u = 0; u < 4; ++u)
      if (v + u * n < cols / 8) {
        float4* d = reinterpret_cast<float4*>(dst + (v + u * n) * 8);
        d[0] = make_float4(f[u][0], f[u][1], f[u][2], f[u][3]);
        d[1] = make_float4(f[u][4], f[u][5], f[u][6], f[u][7]);
      }
  }
}

// fp8 block-wise: the floats v[0, cols) quantized in place per QUANT columns as quant_fp8_group
// does (same bits), stored dequantized (q * scale): the values the fp8 GEMMs multiply with. By
// warps [warp, warp + warps) of the block.
template <int QUANT>
__device__ __forceinline__ void quant_in_place(float* v, int cols, int warp, int warps) {
  constexpr int kPerLane = QUANT / 32;
  const int lane = threadIdx.x % 32;
  for (int g = warp; g < cols / QUANT; g += warps) {
    float* p = v + g * QUANT + lane * kPerLane;
    float m = 0.0f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) m = fmaxf(m, fabsf(p[i]));
    m = act::warp_max(m);
    const float s = fmaxf(m, 1e-10f) / 448.0f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const __nv_fp8_storage_t q = __nv_cvt_float_to_fp8(p[i] / s, __NV_SATFINITE, __NV_E4M3);
      p[i] = __half2float(__half(__nv_cvt_fp8_to_halfraw(q, __NV_E4M3))) * s;
    }
  }
}

}  // namespace decode_detail

template <int ACT,          // tile_math::kDtypeBf16 / kDtypeFp16
          bool WFP8,        // block-wise fp8 weights (e4m3 + scales) and activations
          int K, int N, int TOPK,
          int BN, int BK,   // fp8 block shape (WFP8), else unused
          int NC,           // act columns per block (gate and up rows: 2*NC)
          int LPR,          // lanes per weight row (power of 2 <= 32 dividing K / vector)
          int THREADS,
          bool ROUTE,       // route from router_logits (else precomputed ids)
          int E_GLOBAL, int SCORING, int N_GROUP, int TOPK_GROUP, bool HAS_BIAS,
          bool RENORMALIZE>  // the routing's (routing.cuh)
__global__ void __launch_bounds__(THREADS, 2)  // <= 128 registers: room for moe_decode_down
    moe_decode_up(const float* __restrict__ router_logits,
                  const float* __restrict__ correction_bias, const int* __restrict__ topk_ids_in,
                  const float* __restrict__ topk_weights_in, int* __restrict__ topk_ids_out,
                  float* __restrict__ topk_weights_out, float routed_scaling_factor,
                  const void* __restrict__ x, const unsigned char* __restrict__ w13,
                  const float* __restrict__ w13_scale, void* __restrict__ act, int expert_start,
                  int E) {
  constexpr int kVec = WFP8 ? 16 : 8;             // elements per 16-byte load
  constexpr int kBytes = WFP8 ? 1 : 2;            // per weight element
  constexpr int kSub = THREADS / LPR;             // sub-warps, one weight row each at a time
  constexpr int kRows = 2 * NC;
  constexpr int kRowsPer = kRows / kSub;          // rows per sub-warp, loaded together
  constexpr int kNv = K / kVec / LPR;             // vectors per lane per row
  // Vectors per row loaded before the first is used: at most 16 loads (64 registers) in flight
  // per lane, so that moe_decode_down's blocks fit beside this kernel's on an SM (they load
  // their w2 rows while this kernel streams w13).
  constexpr int kChunk = decode_detail::chunk_vectors(kNv, kRowsPer);
  static_assert(K % (kVec * LPR) == 0 && 32 % LPR == 0, "LPR must divide K / vector and 32");
  static_assert(kRows % kSub == 0 && kRowsPer >= 1, "2*NC rows must spread over the sub-warps");
  static_assert(N % NC == 0 && THREADS % 32 == 0 && THREADS >= 64, "NC, THREADS");
  static_assert(!WFP8 || (K % BK == 0 && BK % kVec == 0 && BK % 32 == 0), "fp8 block_k");
  __shared__ __align__(16) float s_x[K];
  __shared__ float s_h[kRows];
  __shared__ float s_choice[N_GROUP > 1 ? E_GLOBAL : 1];
  __shared__ int s_e;

  // PDL (common/pdl.cuh): router_logits and x may come from the kernel before.
  pdl_wait();
  pdl_launch_dependents();
  const long long slot = blockIdx.y;
  const long long t = slot / TOPK;
  const int j = static_cast<int>(slot % TOPK);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp == 0) {
    int id;
    float wt;
    if constexpr (ROUTE) {
      int ids[TOPK];
      float w[TOPK];
      route_token<E_GLOBAL, TOPK, SCORING, N_GROUP, TOPK_GROUP, HAS_BIAS, RENORMALIZE>(
          router_logits + t * E_GLOBAL, correction_bias, N_GROUP > 1 ? s_choice : nullptr,
          routed_scaling_factor, ids, w);
      id = ids[0];
      wt = w[0];
#pragma unroll
      for (int k = 1; k < TOPK; ++k)
        if (k == j) {
          id = ids[k];
          wt = w[k];
        }
      if (lane == 0 && blockIdx.x == 0) {
        topk_ids_out[slot] = id;
        topk_weights_out[slot] = wt;
      }
    } else {
      id = topk_ids_in[slot];
      wt = topk_weights_in[slot];
    }
    (void)wt;
    if (lane == 0) s_e = id - expert_start;
  } else {  // warps 1..: the token's hidden state, quantized for fp8 (warp 0 routes meanwhile)
    const int tid = threadIdx.x - 32, n = THREADS - 32;
    decode_detail::load_floats<ACT>(static_cast<const unsigned char*>(x) + t * K * 2, s_x, K,
                                    tid, n);
    if constexpr (WFP8) {
      // Barrier 1 of warps 1.. only (n threads): warp 0 may still be routing.
      asm volatile("bar.sync 1, %0;\n" ::"r"(n) : "memory");
      decode_detail::quant_in_place<BK>(s_x, K, warp - 1, THREADS / 32 - 1);
    }
  }
  __syncthreads();
  const int e = s_e;
  if (static_cast<unsigned>(e) >= static_cast<unsigned>(E)) return;  // another rank's slot

  const int sub = threadIdx.x / LPR, sl = threadIdx.x % LPR;
  const int rot = decode_detail::piece_rotation<WFP8>(sl);
  const int n0 = blockIdx.x * NC;
  float acc[kRowsPer];
  long long row_off[kRowsPer];  // element offset of each row in w13
  const float* scale_row[kRowsPer];
#pragma unroll
  for (int r = 0; r < kRowsPer; ++r) {
    const int lr = sub * kRowsPer + r;  // 0..NC-1 gate, NC..2NC-1 up
    const long long n = lr < NC ? n0 + lr : N + n0 + (lr - NC);
    row_off[r] = (static_cast<long long>(e) * 2 * N + n) * K;
    scale_row[r] = WFP8 ? w13_scale + (static_cast<long long>(e) * (2 * N / BN) + n / BN) * (K / BK)
                        : nullptr;
    acc[r] = 0.0f;
  }
#pragma unroll 1  // one chunk's loads in flight at a time (the register budget above)
  for (int c0 = 0; c0 < kNv; c0 += kChunk) {
    uint4 wv[kRowsPer][kChunk];
    float ws[kRowsPer][kChunk];
#pragma unroll
    for (int r = 0; r < kRowsPer; ++r)
#pragma unroll
      for (int c = 0; c < kChunk; ++c) {
        if (c0 + c < kNv) {
          const int k = ((c0 + c) * LPR + sl) * kVec;
          wv[r][c] = decode_detail::ldg_stream(w13 + (row_off[r] + k) * kBytes);
          ws[r][c] = WFP8 ? __ldg(scale_row[r] + k / BK) : 1.0f;
        }
      }
#pragma unroll
    for (int r = 0; r < kRowsPer; ++r)
#pragma unroll
      for (int c = 0; c < kChunk; ++c) {
        if (c0 + c < kNv) {
          const int k = ((c0 + c) * LPR + sl) * kVec;
          const float d = decode_detail::dot_vec<WFP8, ACT>(wv[r][c], s_x + k, rot);
          acc[r] = WFP8 ? fmaf(d, ws[r][c], acc[r]) : acc[r] + d;
        }
      }
  }
#pragma unroll
  for (int r = 0; r < kRowsPer; ++r) {
#pragma unroll
    for (int off = LPR / 2; off > 0; off >>= 1)
      acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], off);
    if (sl == 0) s_h[sub * kRowsPer + r] = acc[r];
  }
  __syncthreads();
  for (int i = threadIdx.x; i < NC; i += THREADS) {
    // GEMM1's h is ACT in the staged fp8 pipeline: round gate and up as it does.
    const float g = WFP8 ? decode_detail::round_act<ACT>(s_h[i]) : s_h[i];
    const float u = WFP8 ? decode_detail::round_act<ACT>(s_h[NC + i]) : s_h[NC + i];
    decode_detail::store_act<ACT>(act, slot * N + n0 + i, act::silu_mul(g, u));
  }
}

template <int ACT, bool WFP8, int K, int N, int TOPK, int BN, int BK,
          int HC,       // output columns (w2 rows) per block
          int LPR,      // lanes per weight row (power of 2 <= 32 dividing N / vector)
          int THREADS,
          bool ROUTE, int E_GLOBAL, int SCORING, int N_GROUP, int TOPK_GROUP, bool HAS_BIAS,
          bool RENORMALIZE>
__global__ void __launch_bounds__(THREADS)
    moe_decode_down(const float* __restrict__ router_logits,
                    const float* __restrict__ correction_bias,
                    const int* __restrict__ topk_ids_in, const float* __restrict__ topk_weights_in,
                    float routed_scaling_factor, const void* __restrict__ act,
                    const unsigned char* __restrict__ w2, const float* __restrict__ w2_scale,
                    void* __restrict__ out, int expert_start, int E) {
  constexpr int kVec = WFP8 ? 16 : 8;
  constexpr int kBytes = WFP8 ? 1 : 2;
  constexpr int kSub = THREADS / LPR;
  constexpr int kHPer = HC / kSub;               // output columns per sub-warp
  constexpr int kRowsPer = kHPer * TOPK;         // w2 rows per sub-warp (all in registers)
  constexpr int kNv = N / kVec / LPR;
  static_assert(N % (kVec * LPR) == 0 && 32 % LPR == 0, "LPR must divide N / vector and 32");
  static_assert(HC % kSub == 0 && kHPer >= 1 && K % HC == 0, "HC must spread over sub-warps");
  static_assert(kRowsPer * kNv <= 64, "w2 rows per sub-warp must fit in registers");
  static_assert(!WFP8 || (N % BK == 0 && BK % kVec == 0 && BK % 32 == 0), "fp8 block_k");
  __shared__ __align__(16) float s_a[TOPK * N];
  __shared__ float s_choice[N_GROUP > 1 ? E_GLOBAL : 1];
  __shared__ int s_e[TOPK];
  __shared__ float s_w[TOPK];

  const long long t = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // Routing and weights are not moe_decode_up's outputs, and moe_decode_up waited for the kernel
  // before it (so the router logits are complete) before it let this grid start: route and load
  // the w2 rows now, while moe_decode_up still streams w13.
  if (warp == 0) {
    int ids[TOPK];
    float w[TOPK];
    if constexpr (ROUTE) {
      route_token<E_GLOBAL, TOPK, SCORING, N_GROUP, TOPK_GROUP, HAS_BIAS, RENORMALIZE>(
          router_logits + t * E_GLOBAL, correction_bias, N_GROUP > 1 ? s_choice : nullptr,
          routed_scaling_factor, ids, w);
    } else {
#pragma unroll
      for (int k = 0; k < TOPK; ++k) {
        ids[k] = topk_ids_in[t * TOPK + k];
        w[k] = topk_weights_in[t * TOPK + k];
      }
    }
    if (lane == 0) {
#pragma unroll
      for (int k = 0; k < TOPK; ++k) {
        s_e[k] = ids[k] - expert_start;
        s_w[k] = w[k];
      }
    }
  }
  __syncthreads();
  const int sub = threadIdx.x / LPR, sl = threadIdx.x % LPR;
  const int rot = decode_detail::piece_rotation<WFP8>(sl);
  const int h0 = blockIdx.x * HC + sub * kHPer;
  uint4 wv[kRowsPer][kNv];
  float ws[kRowsPer][kNv];
#pragma unroll
  for (int r = 0; r < kRowsPer; ++r) {
    const int jj = r % TOPK;
    const int h = h0 + r / TOPK;
    const int e = s_e[jj];
    const bool local = static_cast<unsigned>(e) < static_cast<unsigned>(E);
    const long long row = (static_cast<long long>(local ? e : 0) * K + h) * N;
#pragma unroll
    for (int c = 0; c < kNv; ++c) {
      const int n = (c * LPR + sl) * kVec;
      if (local) {
        wv[r][c] = decode_detail::ldg_stream(w2 + (row + n) * kBytes);
        ws[r][c] = WFP8 ? __ldg(w2_scale + (static_cast<long long>(e) * (K / BN) + h / BN) *
                                               (N / BK) + n / BK)
                        : 1.0f;
      } else {
        wv[r][c] = make_uint4(0, 0, 0, 0);
        ws[r][c] = 0.0f;
      }
    }
  }

  // PDL: act is moe_decode_up's output; out may still be read by the kernel before.
  pdl_wait();
  pdl_launch_dependents();
  // act rows of other ranks' slots are never written: their s_a rows are garbage, never used.
  // The token's TOPK rows are contiguous in act: one load pass over all of them.
  decode_detail::load_floats<ACT>(static_cast<const unsigned char*>(act) + t * TOPK * N * 2, s_a,
                                  TOPK * N, threadIdx.x, THREADS);
  __syncthreads();
  if constexpr (WFP8) {
    for (int jj = 0; jj < TOPK; ++jj)
      if (static_cast<unsigned>(s_e[jj]) < static_cast<unsigned>(E))
        decode_detail::quant_in_place<BK>(s_a + jj * N, N, warp, THREADS / 32);
    __syncthreads();
  }
#pragma unroll
  for (int hh = 0; hh < kHPer; ++hh) {
    float sum = 0.0f;
#pragma unroll
    for (int jj = 0; jj < TOPK; ++jj) {
      const int r = hh * TOPK + jj;
      float acc = 0.0f;
#pragma unroll
      for (int c = 0; c < kNv; ++c) {
        const int n = (c * LPR + sl) * kVec;
        const float d = decode_detail::dot_vec<WFP8, ACT>(wv[r][c], s_a + jj * N + n, rot);
        acc = WFP8 ? fmaf(d, ws[r][c], acc) : acc + d;
      }
#pragma unroll
      for (int off = LPR / 2; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
      // GEMM2's y is ACT (routed weight applied) before the top-k sum: round as it does.
      if (static_cast<unsigned>(s_e[jj]) < static_cast<unsigned>(E))
        sum += decode_detail::round_act<ACT>(s_w[jj] * acc);
    }
    if (sl == 0) decode_detail::store_act<ACT>(out, t * K + h0 + hh, sum);
  }
}

}  // namespace moetune
