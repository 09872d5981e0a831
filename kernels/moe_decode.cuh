// The decode kernels: the whole MoE layer in two launches for a few tokens (M <= 4), where the
// staged pipeline (routing+align, GEMM1, SiLU·up, GEMM2, top-k sum: five launches at M = 1) costs
// a stage boundary (1-2.5 µs on the H200, `moetune profile`) per stage on top of streaming the
// active experts' weights once. Each GEMM is a matrix-vector product per slot on the tensor cores
// (mma.sync m16n8: 16 weight rows times the slot's vector in column 0 of the 8; the other seven
// columns are wasted, which costs nothing here: the layer is bound by the weight bytes, and one
// mma replaces hundreds of CUDA-core instructions per 512 weight bytes, the first version's limit).
//
//   moe_decode_up    grid (N / 16, M * TOPK), 64 * WPT threads: block (c, slot) routes its slot's
//                    token (warp 0, the ids only on the bulk path; the other warps load, and for
//                    fp8 quantize, the token's hidden state into shared memory), then 2 * WPT
//                    warps compute gate and up for columns [16c, 16c + 16) of its expert (WPT
//                    warps per 16-row tile, each a 1/WPT slice of K, summed in a fixed order)
//                    and write SiLU(gate)·up as ACT to act.
//                    Each warp streams its 16 row slices either through register batches
//                    (PIECES = 0) or, on sm_90+ (PIECES > 0), by 16 * PIECES bulk copies into
//                    its own dynamic shared memory, all in flight at once, PIECES mbarriers.
//   moe_decode_down  grid (K / 16, M), 32 * TOPK threads: block (c, t) routes token t again (the
//                    same code and inputs: the same ids and weights), warp j loads the w2 rows
//                    [16c, 16c + 16) of slot j's expert into registers BEFORE waiting for
//                    moe_decode_up (PDL: weights and router logits are not its outputs); block
//                    (0, t) then writes the routing's outputs where up's bulk path did not,
//                    and every block reads (fp8: quantizes) slot j's act and computes its 16
//                    outputs; then
//                    out[t, h] = Σ_j round(w_j · y_j[h]) in order j = 0..TOPK-1.
//
// Fragments (PTX ISA, mma.m16n8k16 16-bit and m16n8k32 e4m3: the same byte layout): lane (g, q)
// = (lane / 4, lane % 4) holds of each 32-byte k-step bytes [4q, 4q+4) (a0/b0) and [16+4q, 16+4q+4)
// (a2/b1) of rows g (a0, a2) and g + 8 (a1, a3). The sum over k does not care which bytes form a
// step, so each lane loads 16 contiguous bytes [16q, 16q+16) of a 64-byte chunk of its rows and of
// the vector, and uses bytes 0-7 as step 0 and 8-15 as step 1: two mma per 64-byte chunk, one
// 16-byte load per row per chunk, the weights straight from global memory into registers.
//
// Math, as the staged pipeline up to fp32 summation order: fp8 block-wise quantizes x and act as
// quant_fp8_group does (the same bits for the same input) and scales each BK block's e4m3 product
// sum by w_scale · x_scale (as the GEMMs do); gate and up are rounded to ACT before SiLU (GEMM1's
// h is ACT there), act is ACT, and each slot's product times its weight (GEMM2's y) is rounded to
// ACT before the fp32 sum over j. Slots whose expert is not on this rank add nothing; a token
// without a local slot gets 0.
//
// Pointers: router_logits [M, E_GLOBAL] fp32 (ROUTE) or topk_ids_in / topk_weights_in [M, TOPK]
// (precomputed); correction_bias [E_GLOBAL] fp32 (HAS_BIAS); x [M, K] ACT; w13 [E, 2N, K] and
// w2 [E, K, N] (e4m3 bytes for WFP8, else ACT); w13_scale [E, 2N/BN, K/BK] and w2_scale
// [E, K/BN, N/BK] fp32 (WFP8); act [M*TOPK, N] ACT (workspace); topk_ids_out/topk_weights_out
// [M, TOPK] (written when routing, for checks and callers: by moe_decode_up's register path, else
// by moe_decode_down, UP_BULK); out [M, K] ACT.
// The host (src/moe/decode.cpp decode_kernels_unfit) keeps shapes within the static_asserts and
// both kernels' shared memory within 48 KB.
#pragma once
#include <cuda_fp8.h>

#include "common/act.cuh"
#include "common/mbarrier.cuh"
#include "common/pdl.cuh"
#include "common/ptx.cuh"
#include "routing.cuh"

namespace moetune {
namespace decode_detail {

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
__device__ __forceinline__ float to_float(unsigned short bits) {
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

// Two mma steps (bytes 0-7 and 8-15 of each lane's 16) of rows g (ra) and g + 8 (rb) times the
// vector bytes xv, accumulated into c.
template <bool WFP8, int ACT>
__device__ __forceinline__ void mma_chunk(float (&c)[4], const uint4& ra, const uint4& rb,
                                          const uint4& xv) {
  const unsigned a0[4] = {ra.x, rb.x, ra.y, rb.y};
  const unsigned a1[4] = {ra.z, rb.z, ra.w, rb.w};
  if constexpr (WFP8) {
    ptx::mma_e4m3_16832(c, a0, xv.x, xv.y);
    ptx::mma_e4m3_16832(c, a1, xv.z, xv.w);
  } else if constexpr (ACT == tile_math::kDtypeFp16) {
    ptx::mma_fp16_16816(c, a0, xv.x, xv.y);
    ptx::mma_fp16_16816(c, a1, xv.z, xv.w);
  } else {
    ptx::mma_bf16_16816(c, a0, xv.x, xv.y);
    ptx::mma_bf16_16816(c, a1, xv.z, xv.w);
  }
}

// One warp: `cols` ACT values at src (global) into dst (shared) as the MMA's vector: fp8 (QUANT >
// 0) quantized per QUANT columns as quant_fp8_group does (same bits: e4m3 bytes, scales to
// scale[cols / QUANT]); else the 16-bit values as they are. All loads are issued first.
// QUANT > 0: only the first `groups` groups (<= COLS / QUANT) exist.
template <int ACT, int QUANT, int COLS>
__device__ __forceinline__ void warp_vector(const unsigned char* __restrict__ src,
                                            unsigned char* dst, float* scale,
                                            int groups = COLS / (QUANT > 0 ? QUANT : COLS)) {
  const int lane = threadIdx.x % 32;
  if constexpr (QUANT > 0) {
    static_assert(QUANT % 128 == 0 && COLS % QUANT == 0, "QUANT: a multiple of 128");
    constexpr int kPer = QUANT / 32;  // consecutive columns of one lane per group (4, 8, ...)
    constexpr int kGroups = COLS / QUANT;
    static_assert(kGroups * kPer <= 128, "a warp's share of the vector must fit in registers");
    unsigned short raw[kGroups][kPer];
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
      if (g >= groups) break;
      const uint2* p = reinterpret_cast<const uint2*>(src + (g * QUANT + lane * kPer) * 2);
#pragma unroll
      for (int i = 0; i < kPer / 4; ++i) {
        const uint2 v = p[i];
        raw[g][4 * i] = v.x & 0xffffu;
        raw[g][4 * i + 1] = v.x >> 16;
        raw[g][4 * i + 2] = v.y & 0xffffu;
        raw[g][4 * i + 3] = v.y >> 16;
      }
    }
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
      if (g >= groups) break;
      float f[kPer];
      float m = 0.0f;
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        f[i] = to_float<ACT>(raw[g][i]);
        m = fmaxf(m, fabsf(f[i]));
      }
      // One redux (act::warp_amax), the same bits as quant_fp8_group: on the path to the first
      // weight copy at M = 1 and to the products of moe_decode_down.
      m = act::warp_amax(m);
      const float s = fmaxf(m, 1e-10f) / 448.0f;
#pragma unroll
      for (int i = 0; i < kPer; i += 4) {
        unsigned word = 0;
#pragma unroll
        for (int b = 0; b < 4; ++b)
          word |= static_cast<unsigned>(
                      __nv_cvt_float_to_fp8(f[i + b] / s, __NV_SATFINITE, __NV_E4M3))
                  << (8 * b);
        *reinterpret_cast<unsigned*>(dst + g * QUANT + lane * kPer + i) = word;
      }
      if (lane == 0) scale[g] = s;
    }
  } else {
    static_assert((COLS * 2) % 16 == 0, "16-byte vectors");
    constexpr int kVecs = COLS * 2 / 16;
    constexpr int kPer = (kVecs + 31) / 32;
    uint4 v[kPer];
#pragma unroll
    for (int i = 0; i < kPer; ++i)
      if (lane + 32 * i < kVecs) v[i] = reinterpret_cast<const uint4*>(src)[lane + 32 * i];
#pragma unroll
    for (int i = 0; i < kPer; ++i)
      if (lane + 32 * i < kVecs) reinterpret_cast<uint4*>(dst)[lane + 32 * i] = v[i];
  }
}

// Chunks [first, CHUNKS) of rows pa and pb (each lane's 16 bytes per 64-byte chunk), BATCH
// chunks' loads in flight before the first is used (the last batch may be partial); f(c, ra, rb)
// consumes chunk c in order.
template <int BATCH, int CHUNKS, class F>
__device__ __forceinline__ void stream_chunks(const unsigned char* pa, const unsigned char* pb,
                                              int first, F&& f) {
#pragma unroll 1  // one batch in flight at a time: the register budget
  for (int b0 = first; b0 < CHUNKS; b0 += BATCH) {
    uint4 ra[BATCH], rb[BATCH];
    const bool full = b0 + BATCH <= CHUNKS;
#pragma unroll
    for (int i = 0; i < BATCH; ++i) {
      if (full || b0 + i < CHUNKS) {
        ra[i] = ldg_stream(pa + (b0 + i) * 64);
        rb[i] = ldg_stream(pb + (b0 + i) * 64);
      }
    }
#pragma unroll
    for (int i = 0; i < BATCH; ++i) {
      if (!full && b0 + i >= CHUNKS) break;
      f(b0 + i, ra[i], rb[i]);
    }
  }
}

// Chunks per load batch: `cap` (16-byte loads in flight per row per lane) rounded down to a
// multiple of `unit` (the chunks of one scale block), at most `chunks`; the last batch may be
// partial (still whole scale blocks: chunks is a multiple of unit).
__host__ __device__ constexpr int batch_chunks(int chunks, int unit, int cap) {
  const int c = cap / unit * unit;
  return c < unit ? unit : (c > chunks ? chunks : c);
}

template <int ACT,          // tile_math::kDtypeBf16 / kDtypeFp16
          bool WFP8,        // block-wise fp8 weights (e4m3 + scales) and activations
          int K, int N, int TOPK,
          int BN, int BK,   // fp8 block shape (WFP8), else unused
          int WPT,          // warps per 16-row tile (each a 1/WPT slice of K)
          int BATCH,        // 64-byte chunks per row loaded before the first is used
          int PIECES,       // > 0: the weights by bulk copies into shared memory (below)
          bool ROUTE,       // route from router_logits (else precomputed ids)
          int E_GLOBAL, int SCORING, int N_GROUP, int TOPK_GROUP, bool HAS_BIAS,
          bool RENORMALIZE,  // the routing's (routing.cuh)
          class Mark>        // mark(point): a probe's timeline hook (see below where it is called)
__device__ __forceinline__ void up_block(
    const float* __restrict__ router_logits, const float* __restrict__ correction_bias,
    const int* __restrict__ topk_ids_in, int* __restrict__ topk_ids_out,
    float* __restrict__ topk_weights_out, float routed_scaling_factor, const void* __restrict__ x,
    const unsigned char* __restrict__ w13, const float* __restrict__ w13_scale,
    void* __restrict__ act, int expert_start, int E, int col, long long slot, Mark&& mark) {
  constexpr int kThreads = 64 * WPT;
  constexpr int kEs = WFP8 ? 1 : 2;               // bytes per element
  constexpr int kRowBytes = K * kEs;
  constexpr int kWarpBytes = kRowBytes / WPT;     // each warp's slice of a row
  constexpr int kChunks = kWarpBytes / 64;
  constexpr int kUnit = WFP8 ? BK / 64 : 1;       // chunks per scale block
  constexpr int kBatch = decode_detail::batch_chunks(kChunks, kUnit, BATCH);
  static_assert(N % 16 == 0 && kRowBytes % (64 * WPT) == 0, "N, K and WPT");
  static_assert(!WFP8 || (BK % 128 == 0 && kWarpBytes % BK == 0 && BN % 16 == 0 &&
                          (2 * N) % BN == 0 && K % BK == 0),
                "fp8 block shape");
  __shared__ __align__(16) unsigned char s_x[kRowBytes];
  __shared__ float s_xs[WFP8 ? K / BK : 1];
  __shared__ float s_part[2][WPT][16];
  __shared__ float s_choice[N_GROUP > 1 ? E_GLOBAL : 1];
  __shared__ int s_e;
  // PIECES > 0: each warp's 16 row slices land in its own part of the dynamic shared memory,
  // kStride bytes per row (64 bytes of padding where the slice is a multiple of 128 bytes, so
  // that the LDS.128 of rows g and g + 1 in one quarter-warp hit different banks), in PIECES
  // pieces per slice, each with its own mbarrier.
  constexpr int kStride = kWarpBytes % 128 == 0 ? kWarpBytes + 64 : kWarpBytes;
  static_assert(PIECES >= 0 && PIECES <= 4 && (PIECES == 0 || kChunks % (PIECES > 0 ? PIECES : 1) == 0),
                "PIECES: 0..4, dividing the slice's chunks");
  __shared__ __align__(8) unsigned long long s_bar[PIECES > 0 ? 2 * WPT * PIECES : 1];
  extern __shared__ __align__(128) unsigned char s_w[];
  if constexpr (PIECES > 0) {
    if (threadIdx.x == 0) {
      for (int b = 0; b < 2 * WPT * PIECES; ++b) mbar::init(ptx::smem_addr(&s_bar[b]), 1);
      mbar::fence_init();
    }
  }

  const long long t = slot / TOPK;
  const int j = static_cast<int>(slot % TOPK);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp == 0) {
    int id;
    if constexpr (ROUTE && PIECES > 0) {
      // The bulk path: the ids only, on the path to the first weight copy (Qwen3.5 fp8 M = 1
      // −0.8 µs); moe_decode_down computes the weights and writes the routing's outputs.
      // The register path keeps the full routing below: without the weights ptxas compiled
      // its streaming loop differently, and it lost 2-14% at M = 2..4 (bench/results/
      // 2026-12-02_h200_eighteenth_session.md).
      int ids[TOPK];
      float w[TOPK];
      route_token<E_GLOBAL, TOPK, SCORING, N_GROUP, TOPK_GROUP, HAS_BIAS, RENORMALIZE, false>(
          router_logits + t * E_GLOBAL, correction_bias, N_GROUP > 1 ? s_choice : nullptr,
          routed_scaling_factor, ids, w);
      id = ids[0];
#pragma unroll
      for (int k = 1; k < TOPK; ++k)
        if (k == j) id = ids[k];
    } else if constexpr (ROUTE) {
      int ids[TOPK];
      float w[TOPK];
      route_token<E_GLOBAL, TOPK, SCORING, N_GROUP, TOPK_GROUP, HAS_BIAS, RENORMALIZE>(
          router_logits + t * E_GLOBAL, correction_bias, N_GROUP > 1 ? s_choice : nullptr,
          routed_scaling_factor, ids, w);
      id = ids[0];
      float wt = w[0];
#pragma unroll
      for (int k = 1; k < TOPK; ++k)
        if (k == j) {
          id = ids[k];
          wt = w[k];
        }
      if (lane == 0 && col == 0) {
        topk_ids_out[slot] = id;
        topk_weights_out[slot] = wt;
      }
    } else {
      id = topk_ids_in[slot];
    }
    if (lane == 0) s_e = id - expert_start;
    if (lane == 0) mark(1);  // routed
  } else {  // warps 1..: the token's hidden state (warp 0 routes meanwhile)
    // One memory round trip: every warp issues all its loads before using any.
    const unsigned char* xt = static_cast<const unsigned char*>(x) + t * K * 2;
    if constexpr (WFP8) {
      constexpr int kLoaders = kThreads / 32 - 1;
      constexpr int kPerWarp = (K / BK + kLoaders - 1) / kLoaders;  // groups per warp
      const int g0 = (warp - 1) * kPerWarp;
      if (g0 < K / BK)
        decode_detail::warp_vector<ACT, BK, BK * kPerWarp>(
            xt + g0 * BK * 2, s_x + g0 * BK, s_xs + g0,
            K / BK - g0 < kPerWarp ? K / BK - g0 : kPerWarp);
    } else {
      constexpr int kVecs = kRowBytes / 16, kLoaders = kThreads - 32;
      constexpr int kPer = (kVecs + kLoaders - 1) / kLoaders;
      uint4 v[kPer];
      const int v0 = threadIdx.x - 32;
#pragma unroll
      for (int i = 0; i < kPer; ++i)
        if (v0 + i * kLoaders < kVecs) v[i] = reinterpret_cast<const uint4*>(xt)[v0 + i * kLoaders];
#pragma unroll
      for (int i = 0; i < kPer; ++i)
        if (v0 + i * kLoaders < kVecs) reinterpret_cast<uint4*>(s_x)[v0 + i * kLoaders] = v[i];
    }
    if (threadIdx.x == 32) mark(2);  // warp 1's share of the hidden state done
  }
  __syncthreads();
  if (threadIdx.x == 0) mark(3);  // routed and the hidden state in shared memory
  const int e = s_e;
  if (static_cast<unsigned>(e) >= static_cast<unsigned>(E)) return;  // another rank's slot

  const int tile = warp / WPT, wk = warp % WPT;  // tile 0: gate rows, 1: up rows
  const int g = lane / 4, q = lane % 4;
  const int row0 = (tile == 0 ? 0 : N) + col * 16;
  const unsigned char* slice =  // row row0 of this warp's slice
      w13 + (static_cast<long long>(e) * 2 * N + row0) * kRowBytes + wk * kWarpBytes;
  const unsigned char* px = s_x + wk * kWarpBytes + q * 16;
  const float* ws_row =
      WFP8 ? w13_scale + (static_cast<long long>(e) * (2 * N / BN) + row0 / BN) * (K / BK)
           : nullptr;
  float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  float acc0 = 0.0f, acc8 = 0.0f;  // rows g and g + 8 of column 0 (lanes with q == 0)
  // On the bulk path the warp's weight scales are loaded while its weights are in flight: in
  // chunk() they were one more DRAM round trip after the data had landed.
  constexpr int kScales = kChunks / kUnit;  // scale blocks in this warp's slice (WFP8)
  constexpr bool kPreScales = WFP8 && PIECES > 0 && kScales <= 8;
  float ws_pre[kPreScales ? kScales : 1] = {};
  auto chunk = [&](int i, const uint4& ra, const uint4& rb) {
    const uint4 xv = *reinterpret_cast<const uint4*>(px + i * 64);
    decode_detail::mma_chunk<WFP8, ACT>(c, ra, rb, xv);
    if constexpr (WFP8) {
      if ((i + 1) % kUnit == 0) {  // a BK block done: scale its sum
        const int kb = (wk * kWarpBytes + i * 64) / BK;
        float ws;
        if constexpr (kPreScales) ws = ws_pre[i / kUnit];
        else ws = __ldg(ws_row + kb);
        const float s = ws * s_xs[kb];
        acc0 = fmaf(c[0], s, acc0);
        acc8 = fmaf(c[2], s, acc8);
        c[0] = c[1] = c[2] = c[3] = 0.0f;
      }
    }
  };
  if constexpr (PIECES > 0) {
    // All of the warp's 16 x kWarpBytes in flight at once: 16 * PIECES bulk copies (the TMA: a
    // few instructions where the register batches are hundreds of loads that ptxas spreads
    // among the MMAs, 4 ahead at most: bench/results/2026-12-01_h200_tenth_session.md call 4).
    constexpr int kPieceBytes = kWarpBytes / PIECES, kPieceChunks = kChunks / PIECES;
    unsigned char* ws = s_w + warp * 16 * kStride;
    const unsigned bar0 = ptx::smem_addr(&s_bar[warp * PIECES]);
    if (lane < PIECES) mbar::arrive_expect_tx(bar0 + 8 * lane, 16 * kPieceBytes);
    __syncwarp();
#pragma unroll
    for (int i = lane; i < 16 * PIECES; i += 32) {  // piece p of row r, the first pieces first
      const int p = i / 16, r = i % 16;
      mbar::bulk_copy_g2s(ptx::smem_addr(ws + r * kStride + p * kPieceBytes),
                          slice + static_cast<long long>(r) * kRowBytes + p * kPieceBytes,
                          kPieceBytes, bar0 + 8 * p);
    }
    if constexpr (kPreScales) {
#pragma unroll
      for (int b = 0; b < kScales; ++b) ws_pre[b] = __ldg(ws_row + wk * kWarpBytes / BK + b);
    }
    const unsigned char* sa = ws + g * kStride + q * 16;
#pragma unroll
    for (int p = 0; p < PIECES; ++p) {
      mbar::wait(bar0 + 8 * p, 0);
#pragma unroll
      for (int k = 0; k < kPieceChunks; ++k) {
        const int i = p * kPieceChunks + k;
        const uint4 ra = *reinterpret_cast<const uint4*>(sa + i * 64);
        const uint4 rb = *reinterpret_cast<const uint4*>(sa + 8 * kStride + i * 64);
        chunk(i, ra, rb);
      }
    }
  } else {
    const unsigned char* pa = slice + static_cast<long long>(g) * kRowBytes + q * 16;
    decode_detail::stream_chunks<kBatch, kChunks>(pa, pa + 8LL * kRowBytes, 0, chunk);
  }
  if constexpr (!WFP8) {
    acc0 = c[0];
    acc8 = c[2];
  }
  if (q == 0) {
    s_part[tile][wk][g] = acc0;
    s_part[tile][wk][g + 8] = acc8;
  }
  if (threadIdx.x == 0) mark(4);  // warp 0's weights streamed
  __syncthreads();
  if (threadIdx.x < 16) {
    const int i = threadIdx.x;
    float gate = 0.0f, up = 0.0f;
#pragma unroll
    for (int w = 0; w < WPT; ++w) {
      gate += s_part[0][w][i];
      up += s_part[1][w][i];
    }
    // GEMM1's h is ACT in the staged fp8 pipeline: round gate and up as it does.
    if constexpr (WFP8) {
      gate = decode_detail::round_act<ACT>(gate);
      up = decode_detail::round_act<ACT>(up);
    }
    decode_detail::store_act<ACT>(act, slot * N + col * 16 + i, act::silu_mul(gate, up));
  }
}

// moe_decode_down's blocks per SM to compile for: block fp8 at N <= 256 (its w2 preloads take 32
// registers) with a routing that selects on the logits fits 64 registers, 32 / TOPK blocks of
// 32 * TOPK threads per SM, where ptxas's own choice went to 70 once it did (one block less per
// SM beside an up block); elsewhere 0, ptxas's choice, as before (an explicit 1 changed it: bf16
// 80 -> 94 registers). Where it is capped, the routing's weights may come after the w2 preloads
// (down_block); bf16's kernel took 93 registers that way (80 before: 3 blocks per SM to 2).
__host__ __device__ constexpr int down_min_blocks(bool wfp8, int n, int topk,
                                                  bool selects_on_logits) {
  // At most 16: more blocks per SM than sm_86/89/120 hold only draws a ptxas warning (TOPK = 1).
  return wfp8 && selects_on_logits && n <= 256 && topk <= 32 ? (32 / topk < 16 ? 32 / topk : 16)
                                                             : 0;
}

template <int ACT, bool WFP8, int K, int N, int TOPK, int BN, int BK,
          bool ROUTE, int E_GLOBAL, int SCORING, int N_GROUP, int TOPK_GROUP, bool HAS_BIAS,
          bool RENORMALIZE, bool UP_BULK, class Wait, class Mark>
__device__ __forceinline__ void down_block(
    const float* __restrict__ router_logits, const float* __restrict__ correction_bias,
    const int* __restrict__ topk_ids_in, const float* __restrict__ topk_weights_in,
    int* __restrict__ topk_ids_out, float* __restrict__ topk_weights_out,
    float routed_scaling_factor, const void* __restrict__ act,
    const unsigned char* __restrict__ w2, const float* __restrict__ w2_scale,
    void* __restrict__ out, int expert_start, int E, int col, long long t, Wait&& wait,
    Mark&& mark) {
  constexpr int kEs = WFP8 ? 1 : 2;
  constexpr int kRowBytes = N * kEs;
  constexpr int kChunks = kRowBytes / 64;
  constexpr int kUnit = WFP8 ? BK / 64 : 1;
  // Chunks loaded before the PDL wait (all of a w2 row at the anchors' N = 256).
  constexpr int kPre = decode_detail::batch_chunks(kChunks, kUnit, TOPK <= 8 ? 8 : 4);
  constexpr int kBatch = kPre;  // the chunks after the wait, as many at a time
  static_assert(TOPK >= 1 && TOPK <= 32, "one warp per slot");
  static_assert(kRowBytes % 64 == 0 && K % 16 == 0, "N and K");
  static_assert(!WFP8 || (BK % 128 == 0 && N % BK == 0 && BN % 16 == 0 && K % BN == 0),
                "fp8 block shape");
  __shared__ __align__(16) unsigned char s_a[TOPK][kRowBytes];
  __shared__ float s_as[TOPK][WFP8 ? N / BK : 1];
  __shared__ float s_y[TOPK][16];
  __shared__ float s_choice[N_GROUP > 1 ? E_GLOBAL : 1];
  __shared__ int s_e[TOPK];
  __shared__ float s_w[TOPK];

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // Routing and weights are not moe_decode_up's outputs, and moe_decode_up waited for the kernel
  // before it (so the router logits are complete) before it let this grid start: route and load
  // the w2 rows now, while moe_decode_up still streams w13 (the one exception to the wait-first
  // rule of common/pdl.cuh, noted there). Nothing is written before the wait (mark is a no-op in
  // moe_decode_down; a probe's stamps before it go to a buffer of its own).
  // Beside moe_decode_up's register path (M >= 2: down blocks start as up blocks end, the
  // routing is on the critical path), where the selection does not need the weights and the
  // registers are capped (kApart), the routing before the w2 preloads takes the ids only and
  // each warp computes the weights after issuing them. Qwen3.5 fp8 against main, M = 2..4:
  // +0.6 / -1.7 / +1.2% this way, +1.8 / +2.2 / +2.9% with the weights first; at M = 1, beside
  // the bulk path, this way cost +2.4% (bench/results/2026-12-02_h200_eighteenth_session.md).
  constexpr bool kOnLogits = routing_detail::kSelectsOnLogits<SCORING, N_GROUP, HAS_BIAS>;
  constexpr bool kApart =
      ROUTE && !UP_BULK && kOnLogits && down_min_blocks(WFP8, N, TOPK, kOnLogits) > 0;
  if (warp == 0) {
    int ids[TOPK];
    float w[TOPK];
    if constexpr (ROUTE) {
      route_token<E_GLOBAL, TOPK, SCORING, N_GROUP, TOPK_GROUP, HAS_BIAS, RENORMALIZE, !kApart>(
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
        if constexpr (!kApart) s_w[k] = w[k];
      }
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) mark(1);  // routed
  const int j = warp;
  const int e = s_e[j];
  const bool local = static_cast<unsigned>(e) < static_cast<unsigned>(E);  // warp-uniform
  const int g = lane / 4, q = lane % 4;
  const int h0 = col * 16;
  const unsigned char* pa =
      w2 + (static_cast<long long>(local ? e : 0) * K + h0 + g) * kRowBytes + q * 16;
  const unsigned char* pb = pa + 8LL * kRowBytes;
  uint4 pre_a[kPre], pre_b[kPre];
  if (local) {
#pragma unroll
    for (int i = 0; i < kPre; ++i) {
      pre_a[i] = decode_detail::ldg_stream(pa + i * 64);
      pre_b[i] = decode_detail::ldg_stream(pb + i * 64);
    }
  }

  // kApart: lane k's weight is pick k's; this warp's slot weight is lane j's (else s_w[j], read
  // where it is used: reading it here took bf16's kernel from 80 to 98 registers).
  float pick_w = 0.0f, slot_w = 0.0f;
  if constexpr (kApart) {
    pick_w = softmax_weight_of_pick<E_GLOBAL, TOPK, RENORMALIZE>(
        router_logits + t * E_GLOBAL, s_e[lane < TOPK ? lane : 0] + expert_start,
        routed_scaling_factor);
    slot_w = __shfl_sync(0xffffffffu, pick_w, j);
  }

  // act is moe_decode_up's output; out may still be read by the kernel before.
  if (threadIdx.x == 0) mark(2);  // w2 loads issued
  wait();
  if (threadIdx.x == 0) mark(3);  // released
  // The routing's outputs (for checks and callers) where moe_decode_up did not write them (its
  // bulk path), after the wait: the kernel before may still read them.
  if (ROUTE && UP_BULK && col == 0 && threadIdx.x < TOPK) {
    topk_ids_out[t * TOPK + threadIdx.x] = s_e[threadIdx.x] + expert_start;
    topk_weights_out[t * TOPK + threadIdx.x] = s_w[threadIdx.x];  // not kApart: UP_BULK
  }
  float y0 = 0.0f, y8 = 0.0f;  // rows g and g + 8 of column 0 (lanes with q == 0)
  if (local) {
    decode_detail::warp_vector<ACT, WFP8 ? BK : 0, N>(
        static_cast<const unsigned char*>(act) + (t * TOPK + j) * N * 2, s_a[j], s_as[j]);
    __syncwarp();
    if (threadIdx.x == 0) mark(4);  // warp 0's activation row in shared memory
    const float* ws_row =
        WFP8 ? w2_scale + (static_cast<long long>(e) * (K / BN) + h0 / BN) * (N / BK) : nullptr;
    const unsigned char* px = s_a[j] + q * 16;
    float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    auto chunk = [&](int i, const uint4& ra, const uint4& rb) {
      const uint4 xv = *reinterpret_cast<const uint4*>(px + i * 64);
      decode_detail::mma_chunk<WFP8, ACT>(c, ra, rb, xv);
      if constexpr (WFP8) {
        if ((i + 1) % kUnit == 0) {
          const int kb = i * 64 / BK;
          const float s = __ldg(ws_row + kb) * s_as[j][kb];
          y0 = fmaf(c[0], s, y0);
          y8 = fmaf(c[2], s, y8);
          c[0] = c[1] = c[2] = c[3] = 0.0f;
        }
      }
    };
#pragma unroll
    for (int i = 0; i < kPre; ++i) chunk(i, pre_a[i], pre_b[i]);
    if constexpr (kChunks > kPre)
      decode_detail::stream_chunks<kBatch, kChunks>(pa, pb, kPre, chunk);
    if constexpr (!WFP8) {
      y0 = c[0];
      y8 = c[2];
    }
    // GEMM2's y is ACT (routed weight applied) before the top-k sum: round as it does.
    if (q == 0) {
      const float wj = kApart ? slot_w : s_w[j];
      s_y[j][g] = decode_detail::round_act<ACT>(wj * y0);
      s_y[j][g + 8] = decode_detail::round_act<ACT>(wj * y8);
    }
  }
  if (threadIdx.x == 0) mark(5);  // warp 0's products done
  __syncthreads();
  if (threadIdx.x < 16) {
    float sum = 0.0f;
#pragma unroll
    for (int jj = 0; jj < TOPK; ++jj)
      if (static_cast<unsigned>(s_e[jj]) < static_cast<unsigned>(E)) sum += s_y[jj][threadIdx.x];
    decode_detail::store_act<ACT>(out, t * K + h0 + threadIdx.x, sum);
  }
}
// moe_decode_up's blocks per SM to compile for: 1 on the bulk path (PIECES > 0) where the routing
// holds more than 8 experts per lane (E_GLOBAL > 256), else 0 (ptxas's choice). Without it
// ptxas held that kernel at E = 1000 to 80 registers (3 blocks of 256 threads per SM) and spilled
// 28 bytes once the fp8 amax became a redux (94 registers and no spill with the shuffles; 118
// with this bound), though the bulk path's shared memory lets 1-2 blocks per SM run. The anchors
// (E <= 256) keep ptxas's choice, the code that was measured; the same bound on every bulk
// kernel is PENDING §3 (a device A/B first).
__host__ __device__ constexpr int up_min_blocks(int pieces, int e_global) {
  return pieces > 0 && e_global > 256 ? 1 : 0;
}
}  // namespace decode_detail

// The two launches (src/moe/decode.cpp launch_decode): moe_decode_up, grid (N / 16, M * TOPK),
// 64 * WPT threads; moe_decode_down, grid (K / 16, M), 32 * TOPK threads.
template <int ACT,          // tile_math::kDtypeBf16 / kDtypeFp16
          bool WFP8,        // block-wise fp8 weights (e4m3 + scales) and activations
          int K, int N, int TOPK,
          int BN, int BK,   // fp8 block shape (WFP8), else unused
          int WPT,          // warps per 16-row tile (each a 1/WPT slice of K)
          int BATCH,        // 64-byte chunks per row loaded before the first is used
          int PIECES,       // > 0 (sm_90+): the weights by bulk copies, PIECES per warp slice,
                            // into 2 * WPT * 16 * kStride bytes of dynamic shared memory
          bool ROUTE,       // route from router_logits (else precomputed ids)
          int E_GLOBAL, int SCORING, int N_GROUP, int TOPK_GROUP, bool HAS_BIAS,
          bool RENORMALIZE>  // the routing's (routing.cuh)
__global__ void __launch_bounds__(64 * WPT, decode_detail::up_min_blocks(PIECES, E_GLOBAL))
    moe_decode_up(const float* __restrict__ router_logits,
                  const float* __restrict__ correction_bias, const int* __restrict__ topk_ids_in,
                  const float* __restrict__ topk_weights_in, int* __restrict__ topk_ids_out,
                  float* __restrict__ topk_weights_out, float routed_scaling_factor,
                  const void* __restrict__ x, const unsigned char* __restrict__ w13,
                  const float* __restrict__ w13_scale, void* __restrict__ act, int expert_start,
                  int E) {
  // PDL (common/pdl.cuh): router_logits and x may come from the kernel before.
  pdl_wait();
  pdl_launch_dependents();
  decode_detail::up_block<ACT, WFP8, K, N, TOPK, BN, BK, WPT, BATCH, PIECES, ROUTE, E_GLOBAL, SCORING,
                          N_GROUP, TOPK_GROUP, HAS_BIAS, RENORMALIZE>(
      router_logits, correction_bias, topk_ids_in, topk_ids_out, topk_weights_out,
      routed_scaling_factor, x, w13, w13_scale, act, expert_start, E, blockIdx.x, blockIdx.y,
      [](int) {});
}

template <int ACT, bool WFP8, int K, int N, int TOPK, int BN, int BK, bool ROUTE, int E_GLOBAL,
          int SCORING, int N_GROUP, int TOPK_GROUP, bool HAS_BIAS, bool RENORMALIZE,
          bool UP_BULK>  // moe_decode_up's bulk path ran: write the routing's outputs
__global__ void __launch_bounds__(
    32 * TOPK, decode_detail::down_min_blocks(
                   WFP8, N, TOPK, routing_detail::kSelectsOnLogits<SCORING, N_GROUP, HAS_BIAS>))
    moe_decode_down(const float* __restrict__ router_logits,
                    const float* __restrict__ correction_bias,
                    const int* __restrict__ topk_ids_in, const float* __restrict__ topk_weights_in,
                    int* __restrict__ topk_ids_out, float* __restrict__ topk_weights_out,
                    float routed_scaling_factor, const void* __restrict__ act,
                    const unsigned char* __restrict__ w2, const float* __restrict__ w2_scale,
                    void* __restrict__ out, int expert_start, int E) {
  decode_detail::down_block<ACT, WFP8, K, N, TOPK, BN, BK, ROUTE, E_GLOBAL, SCORING, N_GROUP,
                            TOPK_GROUP, HAS_BIAS, RENORMALIZE, UP_BULK>(
      router_logits, correction_bias, topk_ids_in, topk_weights_in, topk_ids_out,
      topk_weights_out, routed_scaling_factor, act, w2, w2_scale, out, expert_start, E, blockIdx.x,
      blockIdx.y, [] {
        pdl_wait();  // PDL: moe_decode_up's act and the previous kernel's reads of out
        pdl_launch_dependents();
      },
      [](int) {});
}

}  // namespace moetune
