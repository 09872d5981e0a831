// moe_gemms_sliced_balanced: the sliced kernel's layer (GEMM1 per 128-column slice of the
// intermediate, SiLU(gate)·up quantized per token, GEMM2's share of each slice with the routed
// weight and the top-k sum added into out) with its units spread evenly over a grid of one block
// per SM (common/sliced_balance.cuh: the plan and why). Same ring, units, wgmmas, epilogues and
// numbers as moe_gemms_sliced (kernels/moe_gemms_sliced_sm90a.cuh); what differs:
// - a block's GEMM1 range may cut its first and last slice: it publishes its partial sums there,
//   and the last holder of a slice to arrive adds the others' and makes the activation;
// - every activation goes through the exchange buffer (2 KB and 16 scales a slice) with a ready
//   flag, which the consumers wait for before a slice's GEMM2 units (the producer does not);
// - the block derives the alignment itself (ALIGN_E local experts) for each m-block it touches.
// counters: sliced_balance::counter_ints(max_slices), zero on entry and left zero: each slice's
// last arriver clears its count, and the last of its GEMM2 holders to take its activation clears
// its ready flag and that count (the routing or alignment launch zeroes them every call too, but
// the GEMM phase alone and a replayed stage run without one).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include "common/act.cuh"
#include "common/inline_align.cuh"
#include "common/mbarrier.cuh"
#include "common/pdl.cuh"
#include "common/ptx.cuh"
#include "common/red.cuh"
#include "common/sliced_balance.cuh"
#include "common/sliced_plan.cuh"
#include "common/wgmma.cuh"

namespace moetune {
namespace sliced_balanced_detail {

__device__ __forceinline__ void consumer_sync() {
  asm volatile("bar.sync 1, %0;\n" ::"n"(sliced_plan::kConsumerThreads) : "memory");
}
__device__ __forceinline__ void st_release_gpu(int* p, int v) {
  asm volatile("st.release.gpu.global.b32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}

}  // namespace sliced_balanced_detail

template <int N,              // per-rank expert intermediate size
          int K,              // hidden size
          int TOPK,           // experts per token
          int SCALE_BLOCK_N,  // block_n of the weight scales (block_k is 128)
          int NUM_STAGES,     // ring slots
          int ALIGN_E>        // local experts (the block derives the alignment)
__global__ void __launch_bounds__(sliced_plan::kThreads, 1)
    moe_gemms_sliced_balanced(const unsigned char* __restrict__ a_q,  // [M, K] e4m3
                              const float* __restrict__ a_scale,      // [M, K/128]
                              const unsigned char* __restrict__ w13,  // [E, 2N, K] e4m3
                              const float* __restrict__ w13_scale,    // [E, 2N/bn, K/128]
                              const unsigned char* __restrict__ w2,   // [E, K, N] e4m3
                              const float* __restrict__ w2_scale,     // [E, K/bn, N/128]
                              __nv_bfloat16* __restrict__ out,        // [M, K]
                              const float* __restrict__ topk_weights,  // [M*topk]
                              long long M,
                              int* __restrict__ counters,  // counter_ints(max_slices), zero
                              const int* __restrict__ topk_ids,  // [M*topk] global ids
                              int expert_start,  // the rank's first expert
                              int out_zeroed,    // 1: out is zero on entry (no tickets)
                              int max_slices,    // the launch's bound on slices (the counters')
                              unsigned char* __restrict__ exchange) {  // exchange_bytes(grid, max)
  using namespace sliced_plan;
  namespace sb = sliced_balance;
  using sliced_balanced_detail::consumer_sync;
  constexpr int NS = slices(N);
  constexpr int KU1 = up_units(K);
  constexpr int KH = KU1 / 2;
  constexpr int KB = K / kUnitK;
  constexpr int KU2 = N / kUnitK;
  constexpr int ND = down_units(K);
  constexpr int kSBN = SCALE_BLOCK_N;
  constexpr int S = NUM_STAGES;
  constexpr int kMB = sb::kMaxBlockSlices;  // m-blocks a block touches at most (<= its slices)
  static_assert(shape_violation(N, K, SCALE_BLOCK_N, 128) == nullptr,
                "see sliced_plan::shape_violation's reason on the host");
  static_assert(S >= kMinStages && S <= kMaxStages, "NUM_STAGES must be in 2..5");
  static_assert(kUpDepth == 2 && 2 * KH == KU1 && KU1 == 2 * ND, "the units of sliced_plan");
  static_assert(kMB <= 8, "sliced_balance::smem_bytes keeps 8 experts");
  static_assert(ALIGN_E > 0 && inline_align::runs_scratch_ints(ALIGN_E) * 4 <= kStageBytes,
                "the derivation's scratch lives in ring slot 0");

  extern __shared__ __align__(1024) unsigned char smem[];
  unsigned char* s_act = smem + S * kStageBytes;
  unsigned char* s_out = s_act + kActTileBytes;
  float* s_sc = reinterpret_cast<float*>(s_out + 2 * kBlockM * kOutRowBytes);
  float* s_asc = s_sc + S * kSlotScales;
  int* s_slots = reinterpret_cast<int*>(s_asc + kBlockM);  // [kMB][16]
  int* s_mexp = s_slots + kMB * kBlockM;                    // [8] each m-block's expert
  int* s_misc = s_mexp + 8;  // the ticket, the last-arrival flag, 2 free; then the mbarriers
  const unsigned bar_base = ptx::smem_addr(s_misc + 4);
  auto full_bar = [&](int st) { return bar_base + 8u * st; };
  auto empty_bar = [&](int st) { return bar_base + 8u * (S + st); };
  const unsigned smem_base = ptx::smem_addr(smem);

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  int* next_ticket = counters;
  int* zeroed = counters + 1;
  int* done = counters + 2;
  int* arrived = counters + kCounterInts;      // [max_slices] GEMM1 holders arrived
  int* ready = arrived + max_slices;           // [max_slices] the activation is published
  int* taken = ready + max_slices;             // [max_slices] GEMM2 holders that loaded it
  float* partials = reinterpret_cast<float*>(exchange);  // [grid][2][kConsumerThreads][16]
  unsigned char* acts = exchange + 2LL * gridDim.x * sb::kPartialBytes;  // [max_slices][kActBytes]

  pdl_wait();
  int my_ticket = 0;
  if (tid == 0 && !out_zeroed) my_ticket = atomicAdd(next_ticket, 1);
  const long long num_slots = M * TOPK;
  int total_mblocks;
  int* scratch = reinterpret_cast<int*>(smem);  // ring slot 0 until the first copy
  inline_align::derive_runs<kThreads, ALIGN_E>(topk_ids, static_cast<int>(num_slots),
                                               expert_start, scratch, total_mblocks);
  const int n_slices = total_mblocks * NS;
  if (n_slices > max_slices) __trap();  // the host bounds the slots so that this cannot be
  const int G = sb::working_blocks(static_cast<int>(gridDim.x), n_slices);
  const int b = blockIdx.x;
  const bool works = b < G;
  sb::SliceSpan sp1{0, -1}, sp2{0, -1};
  if (works) {
    sp1 = sb::span_of(b, n_slices, KU1, G);
    sp2 = sb::span_of(b, n_slices, ND, G);
  }
  // The m-blocks of the slices this block touches (GEMM1's and GEMM2's spans share their first).
  const int g_first = sp1.first;
  const int g_last = sp1.last > sp2.last ? sp1.last : sp2.last;
  const int mb_first = g_first / NS;
  const int n_mb = works && g_last >= g_first ? g_last / NS - mb_first + 1 : 0;
  if (n_mb > kMB) __trap();  // max_slices <= kMaxSlicesPerSm * grid keeps it below
  __syncthreads();           // derive_runs' last reads of its counts before the lookups
  if (warp < n_mb)
    inline_align::mblock_of<kBlockM, ALIGN_E>(mb_first + warp, scratch, static_cast<int>(num_slots),
                                              s_slots + warp * kBlockM, s_mexp + warp);
  if (tid == 0) {
    s_misc[0] = my_ticket;
#pragma unroll
    for (int st = 0; st < S; ++st) {
      mbar::init(full_bar(st), kProducerThreads);
      mbar::init(empty_bar(st), kConsumerThreads / 32);
    }
  }
  __syncthreads();
  const int ticket = s_misc[0];
  const int zero_blocks = min(static_cast<int>(gridDim.x), kZeroBlocks);
  const bool zeroes = !out_zeroed && ticket < zero_blocks;
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
  auto zero_out = [&](int threads) {
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
  // Slice g's expert, its column slice j and its m-block's slot table.
  auto slice_expert = [&](int g) { return s_mexp[g / NS - mb_first]; };
  auto slice_slots = [&](int g) { return s_slots + (g / NS - mb_first) * kBlockM; };

  // ---- producer warpgroup: the block's GEMM1 units, then its GEMM2 units, through the ring ----
  if (tid >= kConsumerThreads) {
    const int ltid = tid - kConsumerThreads;
    const int urow0 = ltid / 16, uc = ltid % 16;
    const int usw = (uc / 8) * (kUpRows * kUnitK) + urow0 * kUnitK + ((uc % 8) ^ (urow0 & 7)) * 16;
    const int asw = (uc / 8) * kActTileBytes + urow0 * kUnitK + ((uc % 8) ^ (urow0 & 7)) * 16;
    const int row0 = ltid / 8, chunk = ltid % 8;
    const int dst0 = row0 * kUnitK + (chunk ^ (row0 & 7)) * 16;
    int idx = 0;
    auto next_slot = [&]() {
      const int st = idx % S;
      if (idx >= S) mbar::wait(empty_bar(st), static_cast<unsigned>((idx / S - 1) & 1));
      return st;
    };
    for (int g = sp1.first; g <= sp1.last; ++g) {
      const sb::UnitSpan us = sb::units_of(b, g, n_slices, KU1, G);
      const int e = slice_expert(g), j = g % NS;
      const int* slots = slice_slots(g);
      const int aslot[2] = {slots[urow0], slots[urow0 + 8]};
      const int srow = slots[ltid % kBlockM];
      const unsigned char* w13_base =
          w13 + ((long long)e * 2 * N + j * kUnitK + urow0) * K + uc * 16;
      for (int u = us.lo; u < us.hi; ++u, ++idx) {
        const int st = next_slot();
        const unsigned base = smem_base + st * kStageBytes;
        const unsigned sc_dst = ptx::smem_addr(s_sc + st * kSlotScales + ltid);
        const int h = u / KH, k = u % KH;
        if (ltid < kUpWScale) {
          ptx::cp_async_4(sc_dst,
                          srow >= 0 ? a_scale + (long long)(srow / TOPK) * KB + 2 * k + ltid / 16
                                    : a_scale,
                          srow >= 0 ? 4 : 0);
        } else if (ltid < kUpWScale + 2 * kUpDepth) {
          const int q = ltid - kUpWScale;
          const int row = h * N + j * kUnitK + (q / 2) * 64;
          ptx::cp_async_4(
              sc_dst, w13_scale + ((long long)e * (2 * N / kSBN) + row / kSBN) * KB + 2 * k + q % 2,
              4);
        }
#pragma unroll
        for (int a = 0; a < 2; ++a) {
          const int slot = aslot[a];
          ptx::cp_async_16(base + asw + a * 8 * kUnitK,
                           slot >= 0 ? a_q + (long long)(slot / TOPK) * K + 2 * k * kUnitK + uc * 16
                                     : a_q,
                           slot >= 0 ? 16 : 0);
        }
        const unsigned char* wk = w13_base + (long long)h * N * K + 2 * k * kUnitK;
#pragma unroll
        for (int i = 0; i < 16; ++i)
          ptx::cp_async_16(base + kUpATileBytes + usw + i * 8 * kUnitK,
                           wk + (long long)(8 * i) * K, 16);
        mbar::arrive_on_cp_async(full_bar(st));
      }
    }
    for (int g = sp2.first; g <= sp2.last; ++g) {
      const sb::UnitSpan us = sb::units_of(b, g, n_slices, ND, G);
      const int e = slice_expert(g), j = g % NS;
      const unsigned char* w2_base = w2 + ((long long)e * K + row0) * N + j * kUnitK + chunk * 16;
      for (int u = us.lo; u < us.hi; ++u, ++idx) {
        const int st = next_slot();
        const unsigned base = smem_base + st * kStageBytes;
        const unsigned sc_dst = ptx::smem_addr(s_sc + st * kSlotScales + ltid);
        if (ltid >= kBlockM && ltid < kBlockM + 4) {
          const int q = ltid - kBlockM;
          const int row = u * kUnitRows + (q / 2) * 128 + (q % 2) * 64;
          ptx::cp_async_4(sc_dst, w2_scale + ((long long)e * (K / kSBN) + row / kSBN) * KU2 + j, 4);
        }
        const unsigned char* wb = w2_base + (long long)u * kUnitRows * N;
#pragma unroll
        for (int i = 0; i < 16; ++i)
          ptx::cp_async_16(base + kUpATileBytes + dst0 + i * 16 * kUnitK,
                           wb + (long long)(16 * i) * N, 16);
        mbar::arrive_on_cp_async(full_bar(st));
      }
    }
    pdl_launch_dependents();
    return;
  }

  // ---- consumer warpgroups --------------------------------------------------------------------
  if (zeroes) {
    zero_out(kConsumerThreads);
    consumer_sync();
    if (tid == 0) {
      __threadfence();
      atomicAdd(zeroed, 1);
    }
  }
  const int wg = warp / 4;
  const int lane_row = (warp & 3) * 16 + (lane >> 2);
  auto tok = [&](int q4) { return 8 * (q4 / 2) + 2 * (lane & 3) + (q4 & 1); };
  float acc[2][8], part[2][8];
  auto mma_up_unit = [&](int st) {
    const unsigned a_base = smem_base + st * kStageBytes;
    const unsigned w_base = a_base + kUpATileBytes + wg * 64 * kUnitK;
    wgmma::fence();
#pragma unroll
    for (int sub = 0; sub < kUpDepth; ++sub)
#pragma unroll
      for (int ks = 0; ks < kUnitK / 32; ++ks)
        wgmma::mma_e4m3<16>(part[sub],
                            wgmma::make_desc(w_base + sub * kUpRows * kUnitK + ks * 32),
                            wgmma::make_desc(a_base + sub * kActTileBytes + ks * 32),
                            ks == 0 ? 0 : 1);
    wgmma::commit();
    wgmma::wait<0>();
  };
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
  // This thread's 16 accumulators in a partial buffer (64 contiguous bytes a thread).
  auto partial_at = [&](int index) {
    return reinterpret_cast<float4*>(partials + ((long long)index * kConsumerThreads + tid) * 16);
  };
  // SiLU(gate)·up of slice g rounded to bf16, quantized per token slot (as moe_gemms_sliced),
  // into the exchange buffer in the B operand's swizzle; then its ready flag (release).
  auto make_act = [&](int g) {
    const int* slots = slice_slots(g);
#pragma unroll
    for (int q = 0; q < 8; ++q) {
      const int t = tok(2 * (q / 4) + (q & 1)), col = wg * 64 + lane_row + 8 * ((q >> 1) & 1);
      *reinterpret_cast<unsigned short*>(s_out + t * kOutRowBytes + col * 2) =
          bf16_bits(act::silu_mul_fast(acc[0][q], acc[1][q]));
    }
    consumer_sync();
    unsigned char* dst = acts + (long long)g * sb::kActBytes;
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
      const bool valid = slots[r] >= 0;
      unsigned word = 0;
#pragma unroll
      for (int i = 0; i < 4; ++i)
        word |= static_cast<unsigned>(__nv_cvt_float_to_fp8(v[i] / sc, __NV_SATFINITE, __NV_E4M3))
                << (8 * i);
      *reinterpret_cast<unsigned*>(dst + r * kUnitK + (((lane / 4) ^ (r & 7)) * 16) +
                                   (lane & 3) * 4) = valid ? word : 0u;
      if (lane == 0)
        reinterpret_cast<float*>(dst + kActTileBytes)[r] = valid ? sc : 0.f;
    }
    __threadfence();
    consumer_sync();  // every write of the activation (and every read of s_out) before the flag
    if (tid == 0) {
      __threadfence();
      sliced_balanced_detail::st_release_gpu(ready + g, 1);
    }
  };

  // ---- GEMM1: the block's units slice by slice; a cut slice's partial sums are exchanged -----
  int idx = 0;
  for (int g = sp1.first; g <= sp1.last; ++g) {
    const sb::UnitSpan us = sb::units_of(b, g, n_slices, KU1, G);
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int q = 0; q < 8; ++q) acc[i][q] = 0.f;
    for (int u = us.lo; u < us.hi; ++u, ++idx) {
      const int st = idx % S;
      mbar::wait(full_bar(st), static_cast<unsigned>((idx / S) & 1));
      wgmma::fence_proxy_async();
      float sa[kUpDepth][4], sw[kUpDepth];
#pragma unroll
      for (int sub = 0; sub < kUpDepth; ++sub) {
#pragma unroll
        for (int q = 0; q < 4; ++q) sa[sub][q] = s_sc[st * kSlotScales + sub * kBlockM + tok(q)];
        sw[sub] = s_sc[st * kSlotScales + kUpWScale + 2 * wg + sub];
      }
      mma_up_unit(st);
      if (lane == 0) mbar::arrive(empty_bar(st));
      const int h = u / KH;  // gate or up: acc[h]
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        if (hh != h) continue;
#pragma unroll
        for (int sub = 0; sub < kUpDepth; ++sub)
#pragma unroll
          for (int jj = 0; jj < 2; ++jj)
#pragma unroll
            for (int ee = 0; ee < 2; ++ee) {
              const float f = sa[sub][2 * jj + ee] * sw[sub];
              acc[hh][4 * jj + ee] += part[sub][4 * jj + ee] * f;
              acc[hh][4 * jj + 2 + ee] += part[sub][4 * jj + 2 + ee] * f;
            }
      }
    }
    if (us.lo == 0 && us.hi == KU1) {  // the whole slice here
      make_act(g);
      continue;
    }
    // A cut slice: publish these sums, count the arrival; the last holder finishes the slice.
    float4* mine = partial_at(sb::partial_index(b, g, n_slices, KU1, G));
#pragma unroll
    for (int i = 0; i < 4; ++i)
      mine[i] = make_float4(acc[i / 2][4 * (i % 2)], acc[i / 2][4 * (i % 2) + 1],
                            acc[i / 2][4 * (i % 2) + 2], acc[i / 2][4 * (i % 2) + 3]);
    const sb::SliceSpan hold = sb::holders_of(g, n_slices, KU1, G);
    __threadfence();
    consumer_sync();
    if (tid == 0) {
      __threadfence();
      const bool last = atomicAdd(arrived + g, 1) == hold.last - hold.first;
      if (last) arrived[g] = 0;  // every holder has counted: clean for the next launch
      s_misc[1] = last;
      __threadfence();
    }
    consumer_sync();
    if (!s_misc[1]) continue;
    for (int p = hold.first; p <= hold.last; ++p) {
      if (p == b) continue;
      const float4* theirs = partial_at(sb::partial_index(p, g, n_slices, KU1, G));
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float4 v = __ldcg(theirs + i);
        acc[i / 2][4 * (i % 2)] += v.x;
        acc[i / 2][4 * (i % 2) + 1] += v.y;
        acc[i / 2][4 * (i % 2) + 2] += v.z;
        acc[i / 2][4 * (i % 2) + 3] += v.w;
      }
    }
    make_act(g);
  }

  // Out must be zeroed before the first add: the zeroing blocks' count (acquire), long reached.
  if (tid == 0 && !out_zeroed) {
    long long spins = 0;
    while (ptx::ld_acquire_gpu(zeroed) < zero_blocks) {
      __nanosleep(64);
      if (++spins > (1ll << 26)) __trap();  // a zeroing block cannot run: a launch error, no hang
    }
    __threadfence();
  }

  // ---- GEMM2: the block's units slice by slice, each after its slice's activation is ready ----
  const unsigned act_addr = ptx::smem_addr(s_act);
  int out_tile = 0;
  for (int g = sp2.first; g <= sp2.last; ++g) {
    const sb::UnitSpan us = sb::units_of(b, g, n_slices, ND, G);
    const int* slots = slice_slots(g);
    if (tid == 0) {
      long long spins = 0;
      while (ptx::ld_acquire_gpu(ready + g) == 0) {
        __nanosleep(32);
        if (++spins > (1ll << 26)) __trap();  // a holder of the slice cannot run: no hang
      }
    }
    consumer_sync();
    const unsigned char* src = acts + (long long)g * sb::kActBytes;
    if (tid < kActTileBytes / 16)
      reinterpret_cast<uint4*>(s_act)[tid] = __ldcg(reinterpret_cast<const uint4*>(src) + tid);
    else if (tid < kActTileBytes / 16 + kBlockM)
      s_asc[tid - kActTileBytes / 16] =
          __ldcg(reinterpret_cast<const float*>(src + kActTileBytes) + tid - kActTileBytes / 16);
    wgmma::fence_proxy_async();  // our generic-proxy writes of s_act -> the wgmma reads below
    consumer_sync();
    // Count this holder's load; the last clears the flag after the units below (the result's
    // round trip overlaps them).
    int taken_before = 0;
    if (tid == 0) taken_before = atomicAdd(taken + g, 1);
    float scale_t[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int slot = slots[tok(q)];
      scale_t[q] = slot < 0 ? 0.f : s_asc[tok(q)] * __ldg(topk_weights + slot);
    }
    for (int u = us.lo; u < us.hi; ++u, ++idx, out_tile ^= 1) {
      const int st = idx % S;
      mbar::wait(full_bar(st), static_cast<unsigned>((idx / S) & 1));
      wgmma::fence_proxy_async();
      float sw[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) sw[i] = s_sc[st * kSlotScales + kBlockM + 2 * wg + i];
      mma_unit(st, act_addr);
      if (lane == 0) mbar::arrive(empty_bar(st));
      unsigned char* tile = s_out + out_tile * kBlockM * kOutRowBytes;
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
        const int slot = slots[r];
        if (slot < 0) continue;
        red::add8<false>(out + (long long)(slot / TOPK) * K + u * kUnitRows + ch * 8,
                         *reinterpret_cast<const uint4*>(tile + r * kOutRowBytes + ch * 16));
      }
    }
    if (tid == 0) {
      const sb::SliceSpan hold2 = sb::holders_of(g, n_slices, ND, G);
      if (taken_before == hold2.last - hold2.first) {  // every GEMM2 holder has loaded it
        ready[g] = 0;
        taken[g] = 0;
      }
    }
    consumer_sync();  // every wgmma read of s_act done before the next slice's activation lands
  }
  finish();
}

}  // namespace moetune
