// moe_gemms_persistent: GEMM1 (w13, SiLU(gate)·up and its per-token group quantization fused)
// and GEMM2 (w2, times the routed weight) of a block-fp8 layer in one persistent launch, for
// decode sizes on sm_90a. The stage kernels run the two GEMMs as two grids of one wave each:
// every block pays its table reads, ring fill and epilogue with nothing streaming beside it, and
// GEMM2's weights start only once GEMM1's grid has completed. Here one block per SM streams both
// GEMMs' weights through one ring without a break (plan and geometry:
// common/persistent_plan.cuh):
//
// - The producer warpgroup copies unit after unit (cp.async, 16 B per copy, announced on the
//   slot's `full` mbarrier when they land): GEMM1 units with their token rows, then GEMM2 units
//   (weights only). It never waits for GEMM1's results, so GEMM2's first weights are in shared
//   memory while GEMM1's last units are still being multiplied.
// - Two consumer warpgroups take each unit (swap-AB wgmma m64n16k32: the weights as A, 128 rows
//   per warpgroup, the 16 token slots as B), fold its partial sum with the block scales and free
//   the slot, as the warp-specialized kernels/moe_gemm_wgmma_sm90a.cuh does.
// - A GEMM1 tile split over blocks (stream-K) is summed by the last of its blocks to arrive (a
//   ticket per tile; partials in the workspace, summed in block order: deterministic), which then
//   writes the tile's activation (e4m3 [M*topk, N] and its scales) and counts it in the m-block's
//   ready word (release). GEMM2 consumers wait for all up_tiles(N) of their m-block (acquire),
//   copy its activation rows into shared memory and go on with the weights already there.
// - The last block to finish zeroes the ready words (the tickets zero themselves), so repeated
//   launches need no memset; FusedMoe's alignment zeroes all counters once per call as well.
//
// Every block must be resident at once (GEMM2 consumers wait on other blocks' GEMM1 tiles): the
// host launches one block per SM of the device (the shared memory allows no second one), so the
// kernel needs the whole GPU. A grid that shares the SMs for good with other work (this layer
// on two streams at once, a MIG slice or green context smaller than the device's SM count, a
// long-running kernel beside it) can leave a waiting block's producer unscheduled: the wait
// gives up after about 4 s with a launch error (__trap) instead of hanging. That and its speed
// (slower than the stage GEMMs on the H200 so far) are why the layer runs it only when asked. y gets the routed
// rows [M*topk, K] bf16 of valid slots on this rank's experts; the top-k sum follows.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include "common/act.cuh"
#include "common/mbarrier.cuh"
#include "common/pdl.cuh"
#include "common/persistent_plan.cuh"
#include "common/ptx.cuh"
#include "common/wgmma.cuh"

namespace moetune {
namespace persistent_detail {

__device__ __forceinline__ long long globaltimer() {
  long long t;
  asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t));
  return t;
}

// The consumers' own barrier (the producer warpgroup never joins it).
__device__ __forceinline__ void consumer_sync() {
  asm volatile("bar.sync 1, %0;\n" ::"n"(persistent_plan::kConsumerThreads) : "memory");
}

}  // namespace persistent_detail

template <int N,              // per-rank expert intermediate size
          int K,              // hidden size
          int TOPK,           // experts per token
          int SCALE_BLOCK_N,  // block_n of the weight scales (block_k is 128)
          int NUM_STAGES>     // ring slots (persistent_plan::stages_for)
__global__ void __launch_bounds__(persistent_plan::kThreads, 1)
    moe_gemms_persistent(const unsigned char* __restrict__ a_q,     // [M, K] e4m3
                         const float* __restrict__ a_scale,         // [M, K/128]
                         const unsigned char* __restrict__ w13,     // [E, 2N, K] e4m3
                         const float* __restrict__ w13_scale,       // [E, 2N/bn, K/128]
                         const unsigned char* __restrict__ w2,      // [E, K, N] e4m3
                         const float* __restrict__ w2_scale,        // [E, K/bn, N/128]
                         unsigned char* act_q,                      // [M*topk, N] e4m3 (written
                         float* act_scale,                          // [M*topk, N/128] and read here)
                         __nv_bfloat16* __restrict__ y,             // [M*topk, K]
                         const float* __restrict__ topk_weights,    // [M*topk]
                         const int* __restrict__ sorted_token_ids,  // alignment, BLOCK_SIZE_M 16
                         const int* __restrict__ expert_ids,
                         const int* __restrict__ num_tokens_post_padded, long long M,
                         long long max_m_blocks, void* workspace,
                         long long* trace) {  // null, or [gridDim.x][kTraceStride] ns stamps
  using namespace persistent_plan;
  using persistent_detail::consumer_sync;
  constexpr int NT1 = up_tiles(N);
  constexpr int KU1 = up_units(K);
  constexpr int NT2 = down_items(K);
  constexpr int KU2 = down_units(N);
  constexpr int kSBN = SCALE_BLOCK_N;
  constexpr int S = NUM_STAGES;
  static_assert(shape_violation(N, K, SCALE_BLOCK_N, 128) == nullptr,
                "see persistent_plan::shape_violation's reason on the host");
  static_assert(S >= 3 && S <= kMaxStages, "NUM_STAGES must be in 3..6");
  static_assert(kStageBytes % 1024 == 0 && kATileBytes % 1024 == 0, "1024-byte aligned tiles");

  extern __shared__ __align__(1024) unsigned char smem[];
  unsigned char* s_a2 = smem + S * kStageBytes;                    // GEMM2's activation tiles
  float* s_a2s = reinterpret_cast<float*>(s_a2 + KU2 * kATileBytes);  // [16][kMaxDownUnits]
  unsigned char* s_out = reinterpret_cast<unsigned char*>(s_a2s + kBlockM * kMaxDownUnits);
  int* s_expert = reinterpret_cast<int*>(s_out + kBlockM * kOutRowBytes);  // [kMaxMBlocks]
  int* s_slot = s_expert + kMaxMBlocks;                         // [kMaxMBlocks][16]
  int* s_ticket = s_slot + kMaxMBlocks * kBlockM;               // 4 ints
  // Each ring slot's scales, copied with its unit: GEMM1 the 16 token rows' a_scale then the 4
  // slices' w13_scale; GEMM2 the 4 slices' w2_scale (its activation scales are in s_a2s).
  float* s_sc = reinterpret_cast<float*>(s_ticket + 4);         // [S][kSlotScales]
  const unsigned bar_base = ptx::smem_addr(s_sc + S * kSlotScales);
  auto full_bar = [&](int st) { return bar_base + 8u * st; };
  auto empty_bar = [&](int st) { return bar_base + 8u * (S + st); };
  const unsigned smem_base = ptx::smem_addr(smem);

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;

  int* tickets = static_cast<int*>(workspace);        // [max_m_blocks * NT1]
  int* ready = tickets + max_m_blocks * NT1;           // [max_m_blocks]
  int* done = ready + max_m_blocks;                    // [1]
  float4* partials = reinterpret_cast<float4*>(static_cast<unsigned char*>(workspace) +
                                               partials_offset(max_m_blocks, N));

  // trace: (0) past the PDL wait, (1) tables read, (2) first unit in, (3) GEMM1 done, (4) first
  // m-block ready for GEMM2, (5) consumers done, (6) producer's last copy issued, (7) GEMM1 units.
  // Then per unit idx < kTraceUnits: (8 + idx) when its data was in (consumers), (8 +
  // kTraceUnits + idx) when the producer began its copies.
  auto stamp = [&](int i) {
    if (trace != nullptr) trace[blockIdx.x * kTraceStride + i] = persistent_detail::globaltimer();
  };
  // PDL: the alignment tables and a_q come from the kernels before.
  pdl_wait();
  if (threadIdx.x == 0) stamp(0);
  const int nmb = __ldg(num_tokens_post_padded) / kBlockM;
  if (nmb > max_m_blocks) __trap();  // the counters are sized for max_m_blocks
  const long long P = gridDim.x, c = blockIdx.x;
  const long long T1 = (long long)nmb * NT1 * KU1, I2 = (long long)nmb * NT2;
  const long long u0 = range_begin(c, T1, P), u1 = range_begin(c + 1, T1, P);
  const long long i0 = range_begin(c, I2, P), i1 = range_begin(c + 1, I2, P);
  const long long n1 = u1 - u0;                 // GEMM1 units of this block
  const long long n2 = (i1 - i0) * KU2;         // GEMM2 units
  long long b_lo = nmb, b_hi = -1;              // the m-blocks this block touches
  if (n1 > 0) {
    b_lo = min(b_lo, u0 / (NT1 * KU1));
    b_hi = max(b_hi, (u1 - 1) / (NT1 * KU1));
  }
  if (n2 > 0) {
    b_lo = min(b_lo, i0 / NT2);
    b_hi = max(b_hi, (i1 - 1) / NT2);
  }
  const int nb = static_cast<int>(b_hi - b_lo + 1);
  // 32-bit copies for the per-unit index arithmetic (the host keeps T1 and I2 below 2^31:
  // persistent_plan::tables_fit bounds the m-blocks).
  const int u0i = static_cast<int>(u0), i0i = static_cast<int>(i0), b_loi = static_cast<int>(b_lo);
  const int n1i = static_cast<int>(n1), n2i = static_cast<int>(n2);
  if (nb > kMaxMBlocks) __trap();  // the host keeps persistent_plan::tables_fit
  const long long num_slots = M * TOPK;
  for (int i = tid; i < nb * kBlockM; i += kThreads) {
    const int s = __ldg(sorted_token_ids + (b_lo + i / kBlockM) * kBlockM + i % kBlockM);
    s_slot[i] = (s >= 0 && s < num_slots) ? s : -1;
  }
  for (int i = tid; i < nb; i += kThreads) s_expert[i] = __ldg(expert_ids + b_lo + i);
  if (tid == 0) {
#pragma unroll
    for (int st = 0; st < S; ++st) {
      mbar::init(full_bar(st), kProducerThreads);  // every producer thread's copies landed
      mbar::init(empty_bar(st), kConsumerThreads / 32);  // lane 0 of every consumer warp
    }
  }
  __syncthreads();
  if (tid == 0) {
    stamp(1);
    if (trace != nullptr) trace[blockIdx.x * kTraceStride + 7] = n1;
  }

  // ---- producer warpgroup ---------------------------------------------------------------------
  if (tid >= kConsumerThreads) {
    // Thread ltid copies chunk ltid % 8 of tile rows ltid / 8 + 16 i (i < 16): a fixed shared
    // offset per i (the swizzle repeats every 8 rows) and one token row of the A tile.
    const int ltid = tid - kConsumerThreads;
    const int row0 = ltid / 8, chunk = ltid % 8;
    const int dst0 = row0 * kUnitK + (chunk ^ (row0 & 7)) * 16;
    for (int idx = 0; idx < n1i + n2i; ++idx) {
      const int st = static_cast<int>(idx % S);
      if (idx >= S) mbar::wait(empty_bar(st), static_cast<unsigned>((idx / S - 1) & 1));
      if (ltid == 0 && idx < kTraceUnits) stamp(8 + kTraceUnits + static_cast<int>(idx));
      const unsigned base = smem_base + st * kStageBytes;
      if (idx < n1i) {
        const int u = u0i + idx, t = u / KU1;
        const int k = u % KU1, j = t % NT1;
        const int lb = t / NT1 - b_loi;
        const int e = s_expert[lb];
        if (e >= 0) {
          // The unit's scales ride with it (the consumers would otherwise wait one L2 or DRAM
          // round trip per unit: 1.5 µs a unit, measured): a_scale of token row ltid, or of
          // slice ltid - 16 (warpgroup, gate / up) its w13_scale.
          const unsigned sc_dst = ptx::smem_addr(s_sc + st * kSlotScales + ltid);
          if (ltid < kBlockM) {
            const int srow = s_slot[lb * kBlockM + ltid];
            ptx::cp_async_4(
                sc_dst, srow >= 0 ? a_scale + (long long)(srow / TOPK) * KU1 + k : a_scale,
                srow >= 0 ? 4 : 0);
          } else if (ltid < kBlockM + 4) {
            const int q = ltid - kBlockM;  // warpgroup q / 2, slice q % 2
            const int row = (q % 2 == 0 ? 0 : N) + j * 128 + (q / 2) * 64;
            ptx::cp_async_4(
                sc_dst, w13_scale + ((long long)e * (2 * N / kSBN) + row / kSBN) * KU1 + k, 4);
          }
          const int slot = s_slot[lb * kBlockM + row0];
          ptx::cp_async_16(base + dst0,
                           slot >= 0 ? a_q + (long long)(slot / TOPK) * K + k * kUnitK + chunk * 16
                                     : a_q,
                           slot >= 0 ? 16 : 0);
          // Tile row r = row0 + 16 i of warpgroup i / 8: gate rows for (i % 8) < 4, up rows after.
          const unsigned char* wb =
              w13 + ((long long)e * 2 * N + j * 128 + row0) * K + k * kUnitK + chunk * 16;
#pragma unroll
          for (int i = 0; i < 16; ++i) {
            const int src_row = (i % 8 < 4 ? 0 : N) + (i / 8) * 64 + (16 * (i % 8)) % 64;
            ptx::cp_async_16(base + kATileBytes + dst0 + i * 16 * kUnitK,
                             wb + (long long)src_row * K, 16);
          }
        }
      } else {
        const int v = idx - n1i, item = i0i + v / KU2;
        const int k = v % KU2, jj = item % NT2;
        const int e = s_expert[item / NT2 - b_loi];
        if (e >= 0) {
          if (ltid >= kBlockM && ltid < kBlockM + 4) {  // slice q's w2_scale
            const int q = ltid - kBlockM;
            const int row = jj * kUnitRows + (q / 2) * 128 + (q % 2) * 64;
            ptx::cp_async_4(
                ptx::smem_addr(s_sc + st * kSlotScales + ltid),
                w2_scale + ((long long)e * (K / kSBN) + row / kSBN) * KU2 + k, 4);
          }
          const unsigned char* wb =
              w2 + ((long long)e * K + jj * kUnitRows + row0) * N + k * kUnitK + chunk * 16;
#pragma unroll
          for (int i = 0; i < 16; ++i)
            ptx::cp_async_16(base + kATileBytes + dst0 + i * 16 * kUnitK,
                             wb + (long long)(16 * i) * N, 16);
        }
      }
      mbar::arrive_on_cp_async(full_bar(st));
    }
    if (ltid == 0) stamp(6);
    pdl_launch_dependents();  // the top-k sum may be scheduled (it waits for this grid)
    return;
  }

  // ---- consumer warpgroups ----------------------------------------------------------------------
  const int wg = warp / 4;                              // weight rows [128 wg, 128 wg + 128)
  const int lane_row = (warp & 3) * 16 + (lane >> 2);   // row within an m64 slice (+8: h = 1)
  // Accumulator (slice i, q = 4 j + 2 h + e) is weight row 128 wg + 64 i + lane_row + 8 h of
  // token slot 8 j + 2 (lane % 4) + e of the m-block; q4 = 2 j + e names the slot.
  auto tok = [&](int q4) { return 8 * (q4 / 2) + 2 * (lane & 3) + (q4 & 1); };
  float acc[2][8], part[2][8];
  auto zero_acc = [&] {
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int q = 0; q < 8; ++q) acc[i][q] = 0.f;
  };
  auto fold = [&](const float (&sa)[4], const float (&sw)[2]) {
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float f = sa[2 * j + e] * sw[i];
          acc[i][4 * j + e] += part[i][4 * j + e] * f;
          acc[i][4 * j + 2 + e] += part[i][4 * j + 2 + e] * f;
        }
  };
  // The wgmmas of one unit in slot st against the token tile at b_addr; waits for them.
  auto mma_unit = [&](int st, unsigned b_addr) {
    const unsigned w_base = smem_base + st * kStageBytes + kATileBytes + wg * 128 * kUnitK;
    wgmma::fence();
#pragma unroll
    for (int ks = 0; ks < kUnitK / 32; ++ks) {
      const unsigned long long db = wgmma::make_desc(b_addr + ks * 32);
#pragma unroll
      for (int i = 0; i < 2; ++i)
        wgmma::mma_e4m3<16>(part[i], wgmma::make_desc(w_base + i * 64 * kUnitK + ks * 32), db,
                            ks == 0 ? 0 : 1);
    }
    wgmma::commit();
    wgmma::wait<0>();
  };
  auto bf16_bits = [](float v) { return __bfloat16_as_ushort(__float2bfloat16_rn(v)); };

  // GEMM1 tile t's epilogue (acc complete): SiLU(gate)·up rounded to bf16 (as the stage path),
  // staged, quantized per token row (one 128-group), then counted ready for GEMM2.
  auto up_epilogue = [&](int lb, int j, long long b) {
    consumer_sync();  // s_out's previous readers are done
#pragma unroll
    for (int q = 0; q < 8; ++q) {
      const int t = tok(2 * (q / 4) + (q & 1)), col = wg * 64 + lane_row + 8 * ((q >> 1) & 1);
      *reinterpret_cast<unsigned short*>(s_out + t * kOutRowBytes + col * 2) =
          bf16_bits(act::silu_mul_fast(acc[0][q], acc[1][q]));
    }
    consumer_sync();
    for (int r = warp; r < kBlockM; r += kConsumerThreads / 32) {
      const int slot = s_slot[lb * kBlockM + r];
      if (slot < 0) continue;  // warp-uniform
      const unsigned short* src =
          reinterpret_cast<const unsigned short*>(s_out + r * kOutRowBytes + lane * 8);
      float v[4];
      float m = 0.f;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        v[i] = __bfloat162float(__ushort_as_bfloat16(src[i]));
        m = fmaxf(m, fabsf(v[i]));
      }
      m = act::warp_amax(m);
      const float sc = fmaxf(m, 1e-10f) / 448.0f;
      unsigned word = 0;
#pragma unroll
      for (int i = 0; i < 4; ++i)
        word |= static_cast<unsigned>(__nv_cvt_float_to_fp8(v[i] / sc, __NV_SATFINITE, __NV_E4M3))
                << (8 * i);
      *reinterpret_cast<unsigned*>(act_q + (long long)slot * N + j * 128 + lane * 4) = word;
      if (lane == 0) act_scale[(long long)slot * KU2 + j] = sc;
    }
    consumer_sync();  // the tile's rows are written; one fence releases them with the count
    if (tid == 0) {
      __threadfence();
      atomicAdd(ready + b, 1);
    }
  };

  // ---- GEMM1: this block's units, tile segment by tile segment -------------------------------
  // This thread's scales of the unit in slot st: its 4 token columns, its warpgroup's 2 slices.
  auto slot_w_scales = [&](int st, float (&sw)[2]) {
#pragma unroll
    for (int i = 0; i < 2; ++i) sw[i] = s_sc[st * kSlotScales + kBlockM + 2 * wg + i];
  };
  // The block whose GEMM1 range holds unit u (ranges may be empty when T1 < P).
  auto block_of = [&](long long u) {
    long long cc = u * P / T1;
    while (cc + 1 < P && range_begin(cc + 1, T1, P) <= u) ++cc;
    while (cc > 0 && range_begin(cc, T1, P) > u) --cc;
    return cc;
  };
  // Partial q (of 4 float4 per thread) of block cc's segment of tile t: its slot 0 holds the
  // tile its range starts in, slot 1 the tile it ends in (when that is another).
  auto partial = [&](long long cc, long long t, int q) {
    const int which = range_begin(cc, T1, P) / KU1 == t ? 0 : 1;
    return partials + ((cc * 2 + which) * 4 + q) * kConsumerThreads + tid;
  };

  for (int idx = 0; idx < n1i; ++idx) {
    const int u = u0i + idx, t = u / KU1;
    const int k = u % KU1, j = t % NT1;
    const int lb = t / NT1 - b_loi;
    const int st = idx % S;
    const bool live = s_expert[lb] >= 0;
    if (idx == 0 || k == 0) zero_acc();
    mbar::wait(full_bar(st), static_cast<unsigned>((idx / S) & 1));
    if (idx == 0 && tid == 0) stamp(2);
    if (tid == 0 && idx < kTraceUnits) stamp(8 + static_cast<int>(idx));
    wgmma::fence_proxy_async();  // the producer's cp.async bytes -> our wgmma reads
    float sa[4], sw[2];
    if (live) {
#pragma unroll
      for (int q = 0; q < 4; ++q) sa[q] = s_sc[st * kSlotScales + tok(q)];
      slot_w_scales(st, sw);
      mma_unit(st, smem_base + st * kStageBytes);
    }
    if (lane == 0) mbar::arrive(empty_bar(st));
    if (live) fold(sa, sw);
    if (!(k == KU1 - 1 || idx == n1 - 1) || !live) continue;
    // End of this block's segment of tile t.
    const bool whole = t * KU1 >= u0 && (t + 1) * KU1 <= u1;
    if (!whole) {
      const long long c0 = block_of(t * KU1), c1 = block_of(t * KU1 + KU1 - 1);
#pragma unroll
      for (int q = 0; q < 4; ++q)
        __stcg(partial(c, t, q), make_float4(acc[q / 2][(q & 1) * 4], acc[q / 2][(q & 1) * 4 + 1],
                                             acc[q / 2][(q & 1) * 4 + 2],
                                             acc[q / 2][(q & 1) * 4 + 3]));
      consumer_sync();  // every thread's partial is written; one fence publishes them all
      if (tid == 0) {
        __threadfence();
        *s_ticket = atomicAdd(tickets + t, 1);
        __threadfence();  // acquire: the other blocks' partials, for every thread after the barrier
      }
      consumer_sync();
      int contributors = 0;
      for (long long cc = c0; cc <= c1; ++cc)
        contributors += range_begin(cc + 1, T1, P) > range_begin(cc, T1, P) ? 1 : 0;
      if (*s_ticket != contributors - 1) continue;  // block-uniform: another block finishes t
      __threadfence();
      float sum[2][8];
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int q = 0; q < 8; ++q) sum[i][q] = 0.f;
      for (long long cc = c0; cc <= c1; ++cc) {  // in block order: the same sum every launch
        if (range_begin(cc + 1, T1, P) == range_begin(cc, T1, P)) continue;
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const float4 v = cc == c ? make_float4(acc[q / 2][(q & 1) * 4], acc[q / 2][(q & 1) * 4 + 1],
                                                 acc[q / 2][(q & 1) * 4 + 2],
                                                 acc[q / 2][(q & 1) * 4 + 3])
                                   : __ldcg(partial(cc, t, q));
          sum[q / 2][(q & 1) * 4] += v.x;
          sum[q / 2][(q & 1) * 4 + 1] += v.y;
          sum[q / 2][(q & 1) * 4 + 2] += v.z;
          sum[q / 2][(q & 1) * 4 + 3] += v.w;
        }
      }
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int q = 0; q < 8; ++q) acc[i][q] = sum[i][q];
      if (tid == 0) tickets[t] = 0;  // ready for the next launch
    }
    up_epilogue(lb, j, t / NT1);
  }

  if (tid == 0) stamp(3);

  // ---- GEMM2: this block's items ----------------------------------------------------------------
  long long cur_b = -1;
  bool first_ready = true;
  float row_w[4];  // routed weights of this thread's token slots in the current m-block
#pragma unroll
  for (int q = 0; q < 4; ++q) row_w[q] = 0.f;
  for (int v = 0; v < n2i; ++v) {
    const int idx = n1i + v, item = i0i + v / KU2, b = item / NT2;
    const int k = v % KU2, jj = item % NT2;
    const int lb = b - b_loi;
    const int st = idx % S;
    const int e = s_expert[lb];
    if (k == 0) {
      zero_acc();
      if (b != cur_b && e >= 0) {
        cur_b = b;
        consumer_sync();  // the previous m-block's activation tiles are no longer read
        if (tid == 0) {
          // Bounded: a block that never becomes resident (another kernel holding SMs for good)
          // ends in a launch error, not a hang.
          long long spins = 0;
          while (ptx::ld_acquire_gpu(ready + b) < NT1) {
            __nanosleep(64);
            if (++spins > (1ll << 26)) __trap();
          }
          __threadfence();
          if (first_ready) stamp(4);
        }
        first_ready = false;
        consumer_sync();
        for (int i = tid; i < kBlockM * KU2 * 8; i += kConsumerThreads) {
          const int r = i / (KU2 * 8), kk = (i / 8) % KU2, ch = i % 8;
          const int slot = s_slot[lb * kBlockM + r];
          ptx::cp_async_16(
              ptx::smem_addr(s_a2 + kk * kATileBytes + r * kUnitK + (ch ^ (r & 7)) * 16),
              slot >= 0 ? act_q + (long long)slot * N + kk * kUnitK + ch * 16 : act_q,
              slot >= 0 ? 16 : 0);
        }
        ptx::cp_async_commit();
        for (int i = tid; i < kBlockM * KU2; i += kConsumerThreads) {
          const int slot = s_slot[lb * kBlockM + i / KU2];
          s_a2s[(i / KU2) * kMaxDownUnits + i % KU2] =
              slot < 0 ? 0.f : __ldcg(act_scale + (long long)slot * KU2 + i % KU2);
        }
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const int slot = s_slot[lb * kBlockM + tok(q)];
          row_w[q] = slot < 0 ? 0.f : __ldg(topk_weights + slot);
        }
        ptx::cp_async_wait<0>();
        wgmma::fence_proxy_async();
        consumer_sync();
      }
    }
    float sa[4], sw[2];
    mbar::wait(full_bar(st), static_cast<unsigned>((idx / S) & 1));
    if (tid == 0 && idx < kTraceUnits) stamp(8 + static_cast<int>(idx));
    wgmma::fence_proxy_async();
    if (e >= 0) {
      slot_w_scales(st, sw);
#pragma unroll
      for (int q = 0; q < 4; ++q) sa[q] = s_a2s[tok(q) * kMaxDownUnits + k];
      mma_unit(st, ptx::smem_addr(s_a2) + k * kATileBytes);
    }
    if (lane == 0) mbar::arrive(empty_bar(st));
    if (e < 0) continue;
    fold(sa, sw);
    if (k != KU2 - 1) continue;
    // Output columns [256 jj, 256 jj + 256) of the m-block's slots, times the routed weight,
    // staged so that each slot's row leaves in 16-byte stores.
    consumer_sync();
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int q = 0; q < 8; ++q) {
        const int q4 = 2 * (q / 4) + (q & 1);
        const int col = wg * 128 + i * 64 + lane_row + 8 * ((q >> 1) & 1);
        *reinterpret_cast<unsigned short*>(s_out + tok(q4) * kOutRowBytes + col * 2) =
            bf16_bits(acc[i][q] * row_w[q4]);
      }
    consumer_sync();
    for (int i = tid; i < kBlockM * (kUnitRows / 8); i += kConsumerThreads) {
      const int r = i / (kUnitRows / 8), ch = i % (kUnitRows / 8);
      const int slot = s_slot[lb * kBlockM + r];
      if (slot < 0) continue;
      *reinterpret_cast<uint4*>(y + (long long)slot * K + jj * kUnitRows + ch * 8) =
          *reinterpret_cast<const uint4*>(s_out + r * kOutRowBytes + ch * 16);
    }
  }

  // ---- the last block out zeroes the ready words for the next launch -------------------------
  consumer_sync();
  if (tid == 0) stamp(5);
  if (tid == 0) {
    __threadfence();
    if (atomicAdd(done, 1) == static_cast<int>(P) - 1) {
      __threadfence();  // after every block's last ready increment
      for (int b = 0; b < nmb; ++b) ready[b] = 0;
      *done = 0;
      __threadfence();
    }
  }
}

}  // namespace moetune
