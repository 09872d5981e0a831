// moe_gemms_sliced: GEMM1 (w13), SiLU(gate)·up with its per-token quantization, and GEMM2 (w2,
// times the routed weight, the top-k sum folded in) of a block-fp8 layer in one launch, for
// decode sizes on sm_90a. A block owns one 128-column slice of the intermediate for one m-block
// (plan and geometry: common/sliced_plan.cuh). GEMM2's reduction runs over the intermediate, so
// the block's slice of the activation is all it needs for its share of GEMM2: it multiplies
// the 128 columns of w2 that meet its slice and adds the partial rows into out. No block waits
// for another's results, so unlike the persistent kernel the grid need not be resident at once,
// and GEMM2's weights stream into the ring while GEMM1's epilogue runs: the stage path's GEMM2
// launch, its grid's fill and drain, and the activation's round trip through memory are gone.
//
// - The producer warpgroup copies the block's K / 128 GEMM1 units (the 128 gate rows over K,
//   then the 128 up rows: each unit 256 deep, two 128-deep K-subtiles, with the 16 token rows
//   and the scales of both) and then its K / 256 GEMM2 units (256 w2 rows x the slice's 128
//   columns, with their scales) through one mbarrier ring, announcing each on the slot's `full`
//   barrier when its copies land (cp.async.mbarrier.arrive). 256-byte runs of each w13 row copy
//   faster than 128-byte ones (sliced_plan.cuh).
// - Two consumer warpgroups take each unit (swap-AB wgmma m64n16k32: weights as A, the token
//   slots as B; GEMM1: 64 rows of the unit per warpgroup, GEMM2: 128) and fold GEMM1's partial
//   sums with the block scales, as moe_gemms_persistent does.
// - After GEMM1: SiLU(gate)·up rounded to bf16, quantized to e4m3 per token slot (amax / 448,
//   the stage path's values) into a shared tile that is GEMM2's B operand.
// - Each GEMM2 unit's 256 output columns, scaled (w2 block scale x activation scale x routed
//   weight), are staged as bf16 and added into out row slot / topk in 16-byte red.global.add
//   vectors. The sum over slices and top-k lands in any order (bits vary from run to run, as
//   the stage path's folded GEMM2).
// - out_zeroed (a launch before zeroed out: FusedMoe's routing launch, where it runs before
//   this kernel): no counters at all, so nothing atomic sits on a block's first copy or its
//   exit. Otherwise out is zeroed by the first kZeroBlocks blocks to start (a ticket each,
//   taken on entry); a block waits for their count before its first add, which by then (after
//   GEMM1) has long been reached. Every block it waits for holds a ticket, so it is running: no
//   residency assumption. The last block to finish resets the counters.
// - ALIGN_E > 0: the block derives its m-block's expert and slots from topk_ids itself
//   (common/inline_align.cuh, as the stage GEMM1 can), so no alignment launch runs; the
//   routing launch then zeroes the counters. ALIGN_E = 0 reads the alignment's tables.
// - PAIR (N = 256; launched as clusters of two blocks, the m-block's two slices): after GEMM1
//   each block stores its activation tile and scales into its partner's shared memory too
//   (distributed shared memory, an arrival on the partner's mbarrier), and GEMM2 takes units of
//   128 w2 rows x 256 columns (GEMM1's layout: 256-byte runs) over both halves for its half of
//   out's columns (sliced_plan.cuh). The cluster barrier's arrive after the mbarrier inits and
//   its wait before the first store into the partner keep the partner's barrier initialized
//   first. Both blocks of a pair take every early exit together (they share the m-block: an
//   exit that depended on the slice would leave the partner waiting for our activation), and
//   neither exits before the partner's stores into it have arrived (its GEMM2 waits for them).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include "common/act.cuh"
#include "common/cluster.cuh"
#include "common/inline_align.cuh"
#include "common/mbarrier.cuh"
#include "common/pdl.cuh"
#include "common/ptx.cuh"
#include "common/red.cuh"
#include "common/sliced_plan.cuh"
#include "common/wgmma.cuh"

// The L2 prefetch size (bytes, common/ptx.cuh) of the w2 copies: each is 128 bytes of a 256-byte
// w2 row whose other half the sibling slice's block reads at about the same time. The JIT
// defines it from the environment variable of that name (cuda/nvrtc.cpp).
#ifndef MOETUNE_SLICED_W2_L2_PREFETCH
#define MOETUNE_SLICED_W2_L2_PREFETCH MOETUNE_CP_ASYNC_L2_PREFETCH
#endif

// 1 (the default; ALIGN_E > 0, PAIR 0): the producer issues the w13 copies (and w13 scales) of
// its first S ring units as soon as the derivation knows the expert, before the slot list, each
// unit arriving on its slot's full barrier at once (the barriers are set up before the PDL
// wait); the consumers load those units' token rows and activation scales themselves after the
// slot list, so no unit's arrival waits on a later unit's copies. The layer -0.1..-1.1% at
// M = 6..20 on both fp8 anchors (H100 SXM, bench/results/2026-12-07_fortyfourth_session.md). A
// JIT knob from the environment (cuda/nvrtc.cpp): 0 turns it off.
#ifndef MOETUNE_SLICED_EARLY_W13
#define MOETUNE_SLICED_EARLY_W13 1
#endif

#ifndef MOETUNE_SLICED_TRACE
#define MOETUNE_SLICED_TRACE 0
#endif
#if MOETUNE_SLICED_TRACE
// The progress stamps of a trace build (sliced_plan.cuh: kTraceSymbol), unmangled for
// cuModuleGetGlobal.
extern "C" {
__device__ unsigned long long moetune_sliced_trace[moetune::sliced_plan::kTraceBlocks *
                                                   moetune::sliced_plan::kTraceStamps];
}
#endif

namespace moetune {
namespace sliced_detail {

// The consumers' own barrier (the producer warpgroup never joins it).
__device__ __forceinline__ void consumer_sync() {
  asm volatile("bar.sync 1, %0;\n" ::"n"(sliced_plan::kConsumerThreads) : "memory");
}

// Stamp i of this block in a trace build (by the calling thread); nothing otherwise.
__device__ __forceinline__ void stamp(int i) {
#if MOETUNE_SLICED_TRACE
  if (blockIdx.x < sliced_plan::kTraceBlocks) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t));
    moetune_sliced_trace[blockIdx.x * sliced_plan::kTraceStamps + i] = t;
    if (i == 0) {  // where it runs: are the slow blocks slow for their SM?
      unsigned sm;
      asm volatile("mov.u32 %0, %%smid;\n" : "=r"(sm));
      moetune_sliced_trace[blockIdx.x * sliced_plan::kTraceStamps + sliced_plan::kTraceSmid] = sm;
    }
  }
#else
  (void)i;
#endif
}

}  // namespace sliced_detail

template <int N,              // per-rank expert intermediate size
          int K,              // hidden size
          int TOPK,           // experts per token
          int SCALE_BLOCK_N,  // block_n of the weight scales (block_k is 128)
          int NUM_STAGES,     // ring slots
          int ALIGN_E,        // 0: the alignment's tables; else the local experts (derived here)
          int PAIR = 0>       // 1: clusters of two blocks swap activation halves (N = 256)
__global__ void __launch_bounds__(sliced_plan::kThreads, 1)
    moe_gemms_sliced(const unsigned char* __restrict__ a_q,     // [M, K] e4m3
                     const float* __restrict__ a_scale,         // [M, K/128]
                     const unsigned char* __restrict__ w13,     // [E, 2N, K] e4m3
                     const float* __restrict__ w13_scale,       // [E, 2N/bn, K/128]
                     const unsigned char* __restrict__ w2,      // [E, K, N] e4m3
                     const float* __restrict__ w2_scale,        // [E, K/bn, N/128]
                     __nv_bfloat16* __restrict__ out,           // [M, K] (zeroed, then added)
                     const float* __restrict__ topk_weights,    // [M*topk]
                     const int* __restrict__ sorted_token_ids,  // alignment, BLOCK_SIZE_M 16
                     const int* __restrict__ expert_ids,
                     const int* __restrict__ num_tokens_post_padded, long long M,
                     int* __restrict__ counters,  // kCounterInts, 0 on entry (unused: out_zeroed)
                     const int* __restrict__ topk_ids,  // [M*topk] global ids (ALIGN_E > 0)
                     int expert_start,                  // the rank's first expert (ALIGN_E > 0)
                     int out_zeroed) {  // 1: out is zero on entry and counters go unused
  using namespace sliced_plan;
  using sliced_detail::consumer_sync;
  constexpr int NS = slices(N);
  constexpr int KU1 = up_units(K);
  constexpr int KH = KU1 / 2;       // GEMM1 units per half (gate, up)
  constexpr int KB = K / kUnitK;    // a_scale's and w13_scale's columns
  constexpr int KU2 = N / kUnitK;   // w2_scale's columns
  constexpr int ND = down_units(K);
  constexpr int kSBN = SCALE_BLOCK_N;
  constexpr int S = NUM_STAGES;
  static_assert(shape_violation(N, K, SCALE_BLOCK_N, 128) == nullptr,
                "see sliced_plan::shape_violation's reason on the host");
  static_assert(S >= kMinStages && S <= kMaxStages, "NUM_STAGES must be in 2..5");
  static_assert(kStageBytes % 1024 == 0 && kActTileBytes % 1024 == 0, "1024-byte aligned tiles");
  static_assert(kUpDepth == 2 && 2 * KH == KU1, "GEMM1 units: 128 rows x 256 deep, two halves");
  static_assert(ALIGN_E == 0 || tile_math::inline_align_scratch_bytes(ALIGN_E) <= kStageBytes,
                "the derivation's scratch lives in ring slot 0");
  static_assert(PAIR == 0 || pairs(N), "pairs take two slices (N = 256)");

  // (PAIR: slice j's activation tile and scales at index j, in both blocks of the pair.)
  const int b = blockIdx.x / NS, j = blockIdx.x % NS;
  const int own = PAIR ? j : 0;
  extern __shared__ __align__(1024) unsigned char smem[];
  unsigned char* s_act2 = smem + S * kStageBytes;            // GEMM2's B: 2 x [16][128] e4m3
  unsigned char* s_act = s_act2 + own * kActTileBytes;       // this block's tile
  unsigned char* s_out = s_act2 + 2 * kActTileBytes;         // 2 x [16][kOutRowBytes] bf16
  float* s_sc = reinterpret_cast<float*>(s_out + 2 * kBlockM * kOutRowBytes);  // [S][40]
  float* s_asc2 = s_sc + S * kSlotScales;                    // [2][16] activation scales
  float* s_asc = s_asc2 + own * kBlockM;
  int* s_slot = reinterpret_cast<int*>(s_asc2 + 2 * kBlockM);  // [16]
  int* s_ticket = s_slot + kBlockM;                          // 4 ints
  const unsigned bar_base = ptx::smem_addr(s_ticket + 4);
  auto full_bar = [&](int st) { return bar_base + 8u * st; };
  auto empty_bar = [&](int st) { return bar_base + 8u * (S + st); };
  const unsigned pair_bar = bar_base + 16u * S;  // the partner's activation has landed
  const unsigned smem_base = ptx::smem_addr(smem);

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  int* next_ticket = counters;
  int* zeroed = counters + 1;
  int* done = counters + 2;

  auto init_barriers = [&] {  // thread 0
#pragma unroll
    for (int st = 0; st < S; ++st) {
      mbar::init(full_bar(st), kProducerThreads);        // every producer thread's copies landed
      mbar::init(empty_bar(st), kConsumerThreads / 32);  // lane 0 of every consumer warp
    }
    if constexpr (PAIR) {
      mbar::init(pair_bar, kConsumerThreads);  // every consumer thread of the partner
      mbar::fence_init();                      // visible to the partner's arrivals
    }
  };
  // MOETUNE_SLICED_EARLY_W13: the ring units whose weights leave before the slot list.
  constexpr int kEarly =
      ALIGN_E > 0 && PAIR == 0 && MOETUNE_SLICED_EARLY_W13 ? (S < KU1 ? S : KU1) : 0;
  // (kEarly: before the PDL wait, off the critical path; the derivation's barriers publish them.)
  if (kEarly > 0 && tid == 0) init_barriers();

  // PDL: the alignment tables, a_q and the counters' reset come from the kernels before, and
  // the kernel before may still read out.
  if (tid == 0) sliced_detail::stamp(0);
  pdl_wait();
  if (tid == 0) sliced_detail::stamp(1);
  // The ticket's round trip overlaps the derivation below (its value is read after it).
  int my_ticket = 0;
  if (tid == 0 && !out_zeroed) my_ticket = atomicAdd(next_ticket, 1);
  const long long num_slots = M * TOPK;
  // GEMM1's weight copies: producer thread ltid copies chunk uc = ltid % 16 (K-subtile uc / 8)
  // of unit rows urow0 + 8 i (i < 16), urow0 = ltid / 16: a fixed shared offset per i (the
  // swizzle repeats every 8 rows); a warp copies two 256-byte runs. Unit idx = (half h, k):
  // rows h N + 128 j + r of w13, K bytes [256 k, 256 k + 256), into ring slot idx % S.
  const int ltid = tid - kConsumerThreads;
  const int urow0 = ltid / 16, uc = ltid % 16;
  const int usw = (uc / 8) * (kUpRows * kUnitK) + urow0 * kUnitK + ((uc % 8) ^ (urow0 & 7)) * 16;
  auto copy_w13 = [&](int ex, int idx) {
    const int h = idx / KH, k = idx % KH;
    const unsigned char* wk = w13 + ((long long)ex * 2 * N + h * N + j * kUnitK + urow0) * K +
                              2 * k * kUnitK + uc * 16;
    const unsigned dst = smem_base + (idx % S) * kStageBytes + kUpATileBytes + usw;
#pragma unroll
    for (int i = 0; i < 16; ++i)
      ptx::cp_async_16(dst + i * 8 * kUnitK, wk + (long long)(8 * i) * K, 16);
  };
  // Unit idx's w13 scales (warpgroup q / 2, K-subtile q % 2) for producer threads
  // kUpWScale <= ltid < kUpWScale + 2 kUpDepth, into the slot's scales.
  auto copy_w13_scale = [&](int ex, int idx) {
    if (ltid < kUpWScale || ltid >= kUpWScale + 2 * kUpDepth) return;
    const int h = idx / KH, k = idx % KH, q = ltid - kUpWScale;
    const int row = h * N + j * kUnitK + (q / 2) * 64;
    ptx::cp_async_4(ptx::smem_addr(s_sc + (idx % S) * kSlotScales + ltid),
                    w13_scale + ((long long)ex * (2 * N / kSBN) + row / kSBN) * KB + 2 * k + q % 2,
                    4);
  };
  // The derivation's hook (every thread, once the expert ex is known): kEarly units' weights.
  // (ex >= 0 implies the block's m-block is below the padded total: `works` below holds, so no
  // block exits with these copies in flight.)
  auto early_w13 = [&](int ex) {
    if constexpr (kEarly > 0) {
      if (tid < kConsumerThreads || ex < 0) return;
      for (int idx = 0; idx < kEarly; ++idx) {
        copy_w13_scale(ex, idx);
        copy_w13(ex, idx);
        mbar::arrive_on_cp_async(full_bar(idx));  // this unit's copies and those before it
      }
    }
  };
  int total, e;
  if constexpr (ALIGN_E > 0) {
    // Ring slot 0 is the scratch: the producer's first copy comes after the barrier below, and
    // every thread holds `e` and `total` in registers by then. (kEarly: only w13 tiles, past
    // the slot's token rows where the scratch lives, leave before it.)
    static_assert(tile_math::inline_align_scratch_bytes(ALIGN_E) <= kUpATileBytes,
                  "the derivation's scratch must stay clear of slot 0's weight tile");
    inline_align::derive_block<kBlockM, kThreads, ALIGN_E>(
        topk_ids, static_cast<int>(num_slots), expert_start, b, reinterpret_cast<int*>(smem),
        s_slot, e, total, early_w13);
  } else {
    total = __ldg(num_tokens_post_padded);
    e = __ldg(expert_ids + b);
    if (tid < kBlockM) {
      const int s = __ldg(sorted_token_ids + (long long)b * kBlockM + tid);
      s_slot[tid] = (s >= 0 && s < num_slots) ? s : -1;
    }
  }
  if (tid == 0) {
    *s_ticket = my_ticket;
    if constexpr (kEarly == 0) init_barriers();
  }
  __syncthreads();
  if constexpr (PAIR) {
    if (cluster::blocks() != 2) __trap();  // launched without its cluster: no partner to pair
    cluster::arrive();  // this block's barriers exist (waited on after GEMM1)
  }
  const int ticket = *s_ticket;
  const int zero_blocks = min(static_cast<int>(gridDim.x), kZeroBlocks);
  const bool zeroes = !out_zeroed && ticket < zero_blocks;
  const bool works = b * kBlockM < total && e >= 0;  // e < 0: another rank's expert (EP)
  if (tid == 0 && works) sliced_detail::stamp(2);
  // The last block out resets the counters for the next launch (after every block has taken its
  // ticket and passed its wait for the zeroing).
  auto finish = [&] {
    if (tid != 0 || out_zeroed) return;
    __threadfence();
    if (atomicAdd(done, 1) == static_cast<int>(gridDim.x) - 1) {
      *next_ticket = 0;
      *zeroed = 0;
      *done = 0;
      __threadfence();
    }
  };
  auto zero_out = [&](int threads) {  // this block's share of out, then its count (release)
    const long long vecs = M * K * 2 / 16;
    const long long per = (vecs + zero_blocks - 1) / zero_blocks;
    const long long lo = ticket * per, hi = min(lo + per, vecs);
    for (long long v = lo + tid; v < hi; v += threads)
      reinterpret_cast<uint4*>(out)[v] = make_uint4(0, 0, 0, 0);
  };
  if (!works) {
    if (out_zeroed) return;
    if (zeroes) zero_out(kThreads);
    __syncthreads();
    if (zeroes && tid == 0) {
      __threadfence();
      atomicAdd(zeroed, 1);
    }
    finish();
    return;
  }

  // ---- producer warpgroup ---------------------------------------------------------------------
  if (tid >= kConsumerThreads) {
    // GEMM1's token rows: thread ltid copies chunk uc of token rows urow0 + 8 a (a < 2), laid
    // out as the weight rows (copy_w13).
    const int asw = (uc / 8) * kActTileBytes + urow0 * kUnitK + ((uc % 8) ^ (urow0 & 7)) * 16;
    const int aslot[2] = {s_slot[urow0], s_slot[urow0 + 8]};
    // GEMM2: thread ltid copies chunk ltid % 8 of tile rows ltid / 8 + 16 i (i < 16); tile row
    // row0 + 16 i is w2 row 256 u + row0 + 16 i, the slice's 128 columns.
    const int row0 = ltid / 8, chunk = ltid % 8;
    const int dst0 = row0 * kUnitK + (chunk ^ (row0 & 7)) * 16;
    const unsigned char* w2_base = w2 + ((long long)e * K + row0) * N + j * kUnitK + chunk * 16;
    // A pair's GEMM2 unit of w2 rows row_u + r (r < 128), all 256 columns as two 128-deep
    // K-subtiles, GEMM1's copy pattern; the scales of (warpgroup q / 2, subtile q % 2).
    auto copy_pair_unit = [&](unsigned base, unsigned sc_dst, int row_u) {
      if (ltid >= kBlockM && ltid < kBlockM + 4) {
        const int q = ltid - kBlockM;
        const int row = row_u + (q / 2) * 64;
        ptx::cp_async_4(sc_dst, w2_scale + ((long long)e * (K / kSBN) + row / kSBN) * KU2 + q % 2,
                        4);
      }
      const unsigned char* wb = w2 + ((long long)e * K + row_u + urow0) * N + uc * 16;
#pragma unroll
      for (int i = 0; i < 16; ++i)
        ptx::cp_async_16_l2<MOETUNE_SLICED_W2_L2_PREFETCH>(
            base + kUpATileBytes + usw + i * 8 * kUnitK, wb + (long long)(8 * i) * N, 16);
    };
    for (int idx = kEarly; idx < KU1 + ND; ++idx) {
      const int st = idx % S;
      if (idx >= S) mbar::wait(empty_bar(st), static_cast<unsigned>((idx / S - 1) & 1));
      const unsigned base = smem_base + st * kStageBytes;
      const unsigned sc_dst = ptx::smem_addr(s_sc + st * kSlotScales + ltid);
      if (idx < KU1) {
        const int k = idx % KH;
        // The unit's scales ride with it: a_scale of token row ltid % 16 and K-subtile
        // ltid / 16, or (ltid - 32: warpgroup q / 2, subtile q % 2) its w13_scale.
        if (ltid < kUpWScale) {
          const int srow = s_slot[ltid % kBlockM];
          ptx::cp_async_4(sc_dst,
                          srow >= 0 ? a_scale + (long long)(srow / TOPK) * KB + 2 * k + ltid / 16
                                    : a_scale,
                          srow >= 0 ? 4 : 0);
        } else {
          copy_w13_scale(e, idx);
        }
#pragma unroll
        for (int a = 0; a < 2; ++a) {
          const int slot = aslot[a];
          ptx::cp_async_16(base + asw + a * 8 * kUnitK,
                           slot >= 0 ? a_q + (long long)(slot / TOPK) * K + 2 * k * kUnitK + uc * 16
                                     : a_q,
                           slot >= 0 ? 16 : 0);
        }
        copy_w13(e, idx);
      } else if constexpr (PAIR) {  // unit u of this block's half
        copy_pair_unit(base, sc_dst, j * (K / 2) + (idx - KU1) * kUpRows);
      } else {
        const int u = idx - KU1;
        if (ltid >= kBlockM && ltid < kBlockM + 4) {  // slice q's w2_scale
          const int q = ltid - kBlockM;
          const int row = u * kUnitRows + (q / 2) * 128 + (q % 2) * 64;
          ptx::cp_async_4(sc_dst, w2_scale + ((long long)e * (K / kSBN) + row / kSBN) * KU2 + j, 4);
        }
        const unsigned char* wb = w2_base + (long long)u * kUnitRows * N;
#pragma unroll
        for (int i = 0; i < 16; ++i)
          ptx::cp_async_16_l2<MOETUNE_SLICED_W2_L2_PREFETCH>(
              base + kUpATileBytes + dst0 + i * 16 * kUnitK, wb + (long long)(16 * i) * N, 16);
      }
      mbar::arrive_on_cp_async(full_bar(st));
    }
    pdl_launch_dependents();  // the next kernel may be scheduled (it waits for this grid)
    return;
  }

  // ---- consumer warpgroups ----------------------------------------------------------------------
  if constexpr (kEarly > 0) {
    // The early units' token rows (thread tid: chunk c = tid % 16 of token row r = tid / 16,
    // laid out as the producer's copies) and activation scales (thread tid < kUpWScale: token
    // row tid % 16, K-subtile tid / 16); pads read as zero.
    const int r = tid / 16, c = tid % 16, slot = s_slot[r];
    const int sr = tid < kUpWScale ? s_slot[tid % kBlockM] : -1;
    uint4 v[kEarly];
    float sv[kEarly];
#pragma unroll
    for (int idx = 0; idx < kEarly; ++idx) {  // every load in flight before the first store
      const int k = idx % KH;
      v[idx] = slot >= 0 ? __ldg(reinterpret_cast<const uint4*>(
                               a_q + (long long)(slot / TOPK) * K + 2 * k * kUnitK + c * 16))
                         : make_uint4(0, 0, 0, 0);
      sv[idx] = sr >= 0 ? __ldg(a_scale + (long long)(sr / TOPK) * KB + 2 * k + tid / 16) : 0.f;
    }
#pragma unroll
    for (int idx = 0; idx < kEarly; ++idx) {
      *reinterpret_cast<uint4*>(smem + idx * kStageBytes + (c / 8) * kActTileBytes +
                                r * kUnitK + ((c % 8) ^ (r & 7)) * 16) = v[idx];
      if (tid < kUpWScale) s_sc[idx * kSlotScales + tid] = sv[idx];
    }
    wgmma::fence_proxy_async();  // our generic-proxy writes -> the wgmma reads of GEMM1
    consumer_sync();
  }
  if (zeroes) {  // while the first units load
    zero_out(kConsumerThreads);
    consumer_sync();
    if (tid == 0) {
      __threadfence();
      atomicAdd(zeroed, 1);
    }
  }
  const int wg = warp / 4;
  const int lane_row = (warp & 3) * 16 + (lane >> 2);   // row within an m64 slice (+8: h = 1)
  // A warpgroup's m64 slice i (q = 4 j + 2 h + e): row lane_row + 8 h of it, token slot
  // 8 j + 2 (lane % 4) + e of the m-block; q4 = 2 j + e names the slot. GEMM1: acc[i] / part[i]
  // is gate (i = 0) or up (i = 1) row 64 wg + lane_row + 8 h of the slice's half (part[i]: unit
  // K-subtile i); GEMM2: part[i] is unit row 128 wg + 64 i + lane_row + 8 h.
  auto tok = [&](int q4) { return 8 * (q4 / 2) + 2 * (lane & 3) + (q4 & 1); };
  float acc[2][8], part[2][8];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int q = 0; q < 8; ++q) acc[i][q] = 0.f;
  // GEMM1 (and a pair's GEMM2): the wgmmas of the unit in slot st, K-subtile s into part[s]
  // (this warpgroup's m64 slice of the unit's 128 rows) against the token tiles at b_base
  // (two [16][128], kActTileBytes apart); waits for them.
  auto mma_up_unit = [&](int st, unsigned b_base) {
    const unsigned w_base = smem_base + st * kStageBytes + kUpATileBytes + wg * 64 * kUnitK;
    wgmma::fence();
#pragma unroll
    for (int sub = 0; sub < kUpDepth; ++sub)
#pragma unroll
      for (int ks = 0; ks < kUnitK / 32; ++ks)
        wgmma::mma_e4m3<16>(part[sub],
                            wgmma::make_desc(w_base + sub * kUpRows * kUnitK + ks * 32),
                            wgmma::make_desc(b_base + sub * kActTileBytes + ks * 32),
                            ks == 0 ? 0 : 1);
    wgmma::commit();
    wgmma::wait<0>();
  };
  // GEMM2: the wgmmas of the unit in slot st (this warpgroup's 128 of its 256 rows) against the
  // token tile at b_addr; waits for them.
  auto mma_unit = [&](int st, unsigned b_addr) {
    const unsigned w_base = smem_base + st * kStageBytes + kUpATileBytes + wg * 128 * kUnitK;
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

  // ---- GEMM1: acc[0] the gate rows, acc[1] the up rows of this warpgroup's 64 columns --------
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    for (int k = 0; k < KH; ++k) {
      const int idx = h * KH + k, st = idx % S;
      mbar::wait(full_bar(st), static_cast<unsigned>((idx / S) & 1));
      wgmma::fence_proxy_async();  // the producer's cp.async bytes -> our wgmma reads
      float sa[kUpDepth][4], sw[kUpDepth];
#pragma unroll
      for (int sub = 0; sub < kUpDepth; ++sub) {
#pragma unroll
        for (int q = 0; q < 4; ++q) sa[sub][q] = s_sc[st * kSlotScales + sub * kBlockM + tok(q)];
        sw[sub] = s_sc[st * kSlotScales + kUpWScale + 2 * wg + sub];
      }
      mma_up_unit(st, smem_base + st * kStageBytes);
      if (lane == 0) mbar::arrive(empty_bar(st));
#pragma unroll
      for (int sub = 0; sub < kUpDepth; ++sub)
#pragma unroll
        for (int jj = 0; jj < 2; ++jj)
#pragma unroll
          for (int ee = 0; ee < 2; ++ee) {
            const float f = sa[sub][2 * jj + ee] * sw[sub];
            acc[h][4 * jj + ee] += part[sub][4 * jj + ee] * f;
            acc[h][4 * jj + 2 + ee] += part[sub][4 * jj + 2 + ee] * f;
          }
    }
  }

  if (tid == 0) sliced_detail::stamp(3);
  // ---- SiLU(gate)·up rounded to bf16 (as the stage path), quantized per token slot ------------
  // Staged in s_out's first tile (128 columns), then one warp per token row: amax, scale, e4m3
  // into s_act with the 128-byte swizzle the wgmma B operand reads (chunk c of row r at c ^ r%8).
#pragma unroll
  for (int q = 0; q < 8; ++q) {
    const int t = tok(2 * (q / 4) + (q & 1)), col = wg * 64 + lane_row + 8 * ((q >> 1) & 1);
    *reinterpret_cast<unsigned short*>(s_out + t * kOutRowBytes + col * 2) =
        bf16_bits(act::silu_mul_fast(acc[0][q], acc[1][q]));
  }
  consumer_sync();
  // PAIR: the partner's barriers exist once the cluster barrier's phase (arrived after the
  // inits) completes; its tile and scales for this slice sit at the same offsets as ours.
  unsigned peer = 0;
  if constexpr (PAIR) {
    cluster::wait();
    peer = static_cast<unsigned>(j) ^ 1u;  // cluster rank = j (clusters of two along x)
  }
  for (int r = warp; r < kBlockM; r += kConsumerThreads / 32) {
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
    const bool valid = s_slot[r] >= 0;  // padding slots: zeros (never stored, but finite)
    unsigned word = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i)
      word |= static_cast<unsigned>(__nv_cvt_float_to_fp8(v[i] / sc, __NV_SATFINITE, __NV_E4M3))
              << (8 * i);
    unsigned char* dst = s_act + r * kUnitK + (((lane / 4) ^ (r & 7)) * 16) + (lane & 3) * 4;
    *reinterpret_cast<unsigned*>(dst) = valid ? word : 0u;
    if (lane == 0) s_asc[r] = valid ? sc : 0.f;
    if constexpr (PAIR) {
      cluster::store(cluster::map(ptx::smem_addr(dst), peer), valid ? word : 0u);
      if (lane == 0)
        cluster::store(cluster::map(ptx::smem_addr(s_asc + r), peer),
                       __float_as_uint(valid ? sc : 0.f));
    }
  }
  if constexpr (PAIR) {  // our stores, visible to the partner's wgmma, then released to it
    cluster::fence_proxy_async();
    cluster::arrive_remote(cluster::map(pair_bar, peer));
  }
  wgmma::fence_proxy_async();  // our generic-proxy writes of s_act -> the wgmma reads below
  // Out must be zeroed before the first add: the zeroing blocks' count (acquire), long reached.
  if (tid == 0 && !out_zeroed) {
    long long spins = 0;
    while (ptx::ld_acquire_gpu(zeroed) < zero_blocks) {
      __nanosleep(64);
      if (++spins > (1ll << 26)) __trap();  // a zeroing block cannot run: a launch error, no hang
    }
    __threadfence();
  }
  consumer_sync();
  if constexpr (PAIR) {  // the partner's half has landed in s_act2 / s_asc2
    cluster::wait_local(pair_bar, 0);
    wgmma::fence_proxy_async();
  }
  // This thread's token slots: activation scale x routed weight (PAIR: slice 0's, slice 1's).
  float scale_t[4], scale_p[4];
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const int slot = s_slot[tok(q)];
    const float w = slot < 0 ? 0.f : __ldg(topk_weights + slot);
    scale_t[q] = (PAIR ? s_asc2[tok(q)] : s_asc[tok(q)]) * w;
    scale_p[q] = PAIR ? s_asc2[kBlockM + tok(q)] * w : 0.f;
  }

  // ---- GEMM2 of a pair: out's columns [K/2 j, K/2 j + K/2), 128 at a time, both halves ------
  if constexpr (PAIR) {
    const unsigned act2_addr = ptx::smem_addr(s_act2);
    // The unit in slot st (its n-th GEMM2 unit): out's columns [col0, col0 + 128).
    auto pair_unit = [&](int st, int n, int col0) {
      float sw[2];  // w2's block scales of this warpgroup's 64 rows, intermediate half 0 / 1
#pragma unroll
      for (int sub = 0; sub < 2; ++sub) sw[sub] = s_sc[st * kSlotScales + kBlockM + 2 * wg + sub];
      mma_up_unit(st, act2_addr);
      if (lane == 0) mbar::arrive(empty_bar(st));
      unsigned char* tile = s_out + (n & 1) * kBlockM * kOutRowBytes;
#pragma unroll
      for (int q = 0; q < 8; ++q) {
        const int q4 = 2 * (q / 4) + (q & 1);
        const int col = wg * 64 + lane_row + 8 * ((q >> 1) & 1);
        *reinterpret_cast<unsigned short*>(tile + tok(q4) * kOutRowBytes + col * 2) =
            bf16_bits(part[0][q] * sw[0] * scale_t[q4] + part[1][q] * sw[1] * scale_p[q4]);
      }
      consumer_sync();
      for (int i = tid; i < kBlockM * (kUpRows / 8); i += kConsumerThreads) {
        const int r = i / (kUpRows / 8), ch = i % (kUpRows / 8);
        const int slot = s_slot[r];
        if (slot < 0) continue;
        red::add8<false>(out + (long long)(slot / TOPK) * K + col0 + ch * 8,
                         *reinterpret_cast<const uint4*>(tile + r * kOutRowBytes + ch * 16));
      }
    };
    for (int n = 0; n < ND; ++n) {
      const int idx = KU1 + n, st = idx % S;
      mbar::wait(full_bar(st), static_cast<unsigned>((idx / S) & 1));
      wgmma::fence_proxy_async();
      pair_unit(st, n, j * (K / 2) + n * kUpRows);
    }
    consumer_sync();
    if (tid == 0) sliced_detail::stamp(4);
    finish();
    return;
  }

  // ---- GEMM2: the slice's share of out's K columns, 256 at a time ----------------------------
  const unsigned act_addr = ptx::smem_addr(s_act);
  for (int u = 0; u < ND; ++u) {
    const int idx = KU1 + u, st = idx % S;
    mbar::wait(full_bar(st), static_cast<unsigned>((idx / S) & 1));
    wgmma::fence_proxy_async();
    float sw[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) sw[i] = s_sc[st * kSlotScales + kBlockM + 2 * wg + i];
    mma_unit(st, act_addr);
    if (lane == 0) mbar::arrive(empty_bar(st));
    // Staged in tile u % 2: its previous readers (unit u - 2) passed the barrier of unit u - 1.
    unsigned char* tile = s_out + (u & 1) * kBlockM * kOutRowBytes;
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int q = 0; q < 8; ++q) {
        const int q4 = 2 * (q / 4) + (q & 1);
        const int col = wg * 128 + i * 64 + lane_row + 8 * ((q >> 1) & 1);
        *reinterpret_cast<unsigned short*>(tile + tok(q4) * kOutRowBytes + col * 2) =
            bf16_bits(part[i][q] * sw[i] * scale_t[q4]);
      }
    consumer_sync();
    for (int i = tid; i < kBlockM * (kUnitRows / 8); i += kConsumerThreads) {
      const int r = i / (kUnitRows / 8), ch = i % (kUnitRows / 8);
      const int slot = s_slot[r];
      if (slot < 0) continue;
      red::add8<false>(out + (long long)(slot / TOPK) * K + u * kUnitRows + ch * 8,
                       *reinterpret_cast<const uint4*>(tile + r * kOutRowBytes + ch * 16));
    }
  }
  consumer_sync();
  if (tid == 0) sliced_detail::stamp(4);
  finish();
}

}  // namespace moetune
