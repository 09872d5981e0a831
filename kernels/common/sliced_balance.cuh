// How kernels/moe_gemms_sliced_balanced_sm90a.cuh spreads the sliced kernel's work evenly over
// a grid of one block per SM (stream-K over the slices), shared by the kernel and the host
// (src/moe/sliced.cpp) and tested on the host. constexpr only, no CUDA includes.
//
// Why: at decode sizes the sliced kernel has a block per (active expert, 128-column slice), 114
// at Qwen3.5 fp8 TP4 M = 8, so 18 of 132 SMs stream nothing, and a grid of 1.5 waves leaves half
// of them idle in its second wave. One SM pulls a capped share of DRAM bandwidth: copies alone
// move 3.88-3.94 TB/s with 114 blocks on an H200 and 4.0-4.2 with every SM busy (thirteenth
// session, ring_copy), and a queue of small items over 132 blocks copied GEMM1's bytes 5.3%
// faster on an H100 SXM (thirty-sixth session). Items of half a slice gained nothing there:
// balance needs ranges that cut slices anywhere.
//
// The plan: the n slices' GEMM1 units (KU1 per slice: the 128 gate rows then the 128 up rows,
// 256 deep each, as the one-slice kernel) in slice order are U1 = n * KU1 units, and block b
// of G takes units [floor(b U1 / G), floor((b + 1) U1 / G)); then GEMM2's units (ND = KU1 / 2
// per slice) the same way over U2 = n * ND. A slice whose GEMM1 units fall in several blocks is
// finished by the last of them to arrive (an atomic count per slice): it adds the others'
// partial sums (published in the exchange buffer) to its own, computes SiLU·up, quantizes it and
// publishes the activation with a ready flag; every block waits for the flags of the slices of
// its GEMM2 units (its producer meanwhile streams their weights into the ring, which needs no
// activation). No block waits during GEMM1, so every slice's activation is eventually ready
// and no wait can deadlock while every block of the grid gets to run.
#pragma once

#if defined(__CUDACC_RTC__)
#include "common/sliced_plan.cuh"
#else
#include "sliced_plan.cuh"
#endif

namespace moetune {
namespace sliced_balance {

// Blocks that take work: every SM's, but never more than two per slice (a range shorter than
// half a slice's GEMM1 only adds exchanges).
MOETUNE_HD constexpr int working_blocks(int grid, int n_slices) {
  return grid < 2 * n_slices ? grid : 2 * n_slices;
}
// Block b's first unit of U units over G blocks.
MOETUNE_HD constexpr long long range_lo(int b, long long units, int G) {
  return static_cast<long long>(b) * units / G;
}
// The block whose range holds unit x (0 <= x < units): the largest b with range_lo(b) <= x.
MOETUNE_HD constexpr int block_of(long long x, long long units, int G) {
  return static_cast<int>(((x + 1) * G - 1) / units);
}

// Slices [first, last] that block b's range of `per` units a slice touches (last < first: none).
struct SliceSpan {
  int first, last;
};
MOETUNE_HD constexpr SliceSpan span_of(int b, int n_slices, int per, int G) {
  const long long units = static_cast<long long>(n_slices) * per;
  const long long lo = range_lo(b, units, G), hi = range_lo(b + 1, units, G);
  if (hi <= lo) return {0, -1};
  return {static_cast<int>(lo / per), static_cast<int>((hi - 1) / per)};
}
// Block b's units of slice g, [lo, hi) within the slice's `per`.
struct UnitSpan {
  int lo, hi;
};
MOETUNE_HD constexpr UnitSpan units_of(int b, int g, int n_slices, int per, int G) {
  const long long units = static_cast<long long>(n_slices) * per;
  const long long lo = range_lo(b, units, G), hi = range_lo(b + 1, units, G);
  const long long s0 = static_cast<long long>(g) * per;
  const long long a = lo > s0 ? lo : s0, z = hi < s0 + per ? hi : s0 + per;
  return {static_cast<int>(a - s0), static_cast<int>(z - s0)};
}
// The blocks holding slice g's units: [first, last].
MOETUNE_HD constexpr SliceSpan holders_of(int g, int n_slices, int per, int G) {
  const long long units = static_cast<long long>(n_slices) * per;
  return {block_of(static_cast<long long>(g) * per, units, G),
          block_of(static_cast<long long>(g + 1) * per - 1, units, G)};
}
// Where block b keeps its partial sums of slice g: only its first and last slice can be cut.
MOETUNE_HD constexpr int partial_index(int b, int g, int n_slices, int per, int G) {
  return 2 * b + (g == span_of(b, n_slices, per, G).first ? 0 : 1);
}

// Slices one block touches at most (GEMM1 and GEMM2 spans together), where n_slices <=
// kMaxSlicesPerSm * G: the launch's limit (max_slices_for), checked by the host's tests.
constexpr int kMaxSlicesPerSm = 3;
constexpr int kMaxBlockSlices = kMaxSlicesPerSm + 2;
MOETUNE_HD constexpr int max_slices_for(int grid) { return kMaxSlicesPerSm * grid; }

// The exchange buffer: each block's two partial sums (GEMM1's 256 rows x 16 token slots in fp32,
// as its consumers hold them), then each slice's quantized activation ([16][128] e4m3 in the
// wgmma B operand's swizzle) and its 16 scales.
constexpr int kPartialBytes = sliced_plan::kConsumerThreads * 16 * 4;  // 16 KB
constexpr int kActBytes = sliced_plan::kActTileBytes + sliced_plan::kBlockM * 4;
MOETUNE_HD constexpr long long exchange_bytes(int grid, int max_slices) {
  return 2LL * grid * kPartialBytes + static_cast<long long>(max_slices) * kActBytes;
}
// Dynamic shared memory: the one-slice kernel's, with a slot table and an expert for each of
// kMaxBlockSlices m-blocks (8 experts' room, so the mbarriers stay 8-byte aligned).
MOETUNE_HD constexpr int smem_bytes(int stages) {
  return sliced_plan::smem_bytes(stages) - sliced_plan::kBlockM * 4 +
         kMaxBlockSlices * sliced_plan::kBlockM * 4 + 8 * 4;
}
// The most ring slots that fit `smem_limit` bytes per block, at most `want` (0: none fit).
MOETUNE_HD constexpr int stages_for(int want, int smem_limit) {
  for (int s = want < sliced_plan::kMaxStages ? want : sliced_plan::kMaxStages;
       s >= sliced_plan::kMinStages; --s)
    if (smem_bytes(s) <= smem_limit) return s;
  return 0;
}
// int32 counters: the one-slice kernel's three, then each slice's GEMM1 arrivals, ready flag
// and GEMM2 loads.
MOETUNE_HD constexpr int counter_ints(int max_slices) {
  return sliced_plan::kCounterInts + 3 * max_slices;
}

}  // namespace sliced_balance
}  // namespace moetune
