// The balanced sliced kernel's plan (kernels/common/sliced_balance.cuh, no GPU): over every slice
// count a launch takes on grids of 1, 7, 114 and 132 blocks and both fp8 anchors' K, the block
// ranges cover every unit once, each block's slice spans and each slice's holders are what the
// kernel's loops and exchanges assume, the partial sums' places never collide, a block's m-blocks
// fit its tables; and the exchange, counter and shared memory sizes, by hand.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/common/sliced_balance.cuh"
#include "kernels/common/sliced_plan.cuh"

namespace moetune {
namespace {
namespace sb = sliced_balance;
namespace sp = sliced_plan;

// GEMM1 units a slice (KU1) per anchor; GEMM2's are half (ND).
constexpr int kQwenKu1 = sp::up_units(3072);     // Qwen3.5
constexpr int kDeepSeekKu1 = sp::up_units(7168);  // DeepSeek-V3
static_assert(kQwenKu1 == 24 && sp::down_units(3072) == 12);
static_assert(kDeepSeekKu1 == 56 && sp::down_units(7168) == 28);
constexpr int kKu1s[] = {kQwenKu1, kDeepSeekKu1};
constexpr int kGrids[] = {1, 7, 114, 132};

std::string at(int grid, int n, int per, int b, int g) {
  return "grid " + std::to_string(grid) + " n " + std::to_string(n) + " per " +
         std::to_string(per) + " b " + std::to_string(b) + " g " + std::to_string(g);
}
bool empty(sb::UnitSpan u) { return u.hi <= u.lo; }
bool whole(sb::UnitSpan u, int per) { return u.lo == 0 && u.hi == per; }

// Calls check(grid, n, per) for both anchors' GEMM1 and GEMM2 units and every slice count a
// launch on `grid` takes; returns the first failure (a counterexample), "" when none.
template <class Check>
std::string for_all(Check check) {
  for (int ku1 : kKu1s)
    for (int per : {ku1, ku1 / 2})
      for (int grid : kGrids)
        for (int n = 1; n <= sb::max_slices_for(grid); ++n) {
          std::string why = check(grid, n, per);
          if (!why.empty()) return why;
        }
  return "";
}

TEST(MoeSlicedBalance, WorkingBlocksAreTheGridButTwoPerSliceAtMost) {
  EXPECT_EQ(sb::working_blocks(132, 114), 132);
  EXPECT_EQ(sb::working_blocks(132, 66), 132);
  EXPECT_EQ(sb::working_blocks(132, 65), 130);
  EXPECT_EQ(sb::working_blocks(132, 40), 80);
  EXPECT_EQ(sb::working_blocks(114, 56), 112);
  EXPECT_EQ(sb::working_blocks(7, 3), 6);
  EXPECT_EQ(sb::working_blocks(1, 1), 1);
  EXPECT_EQ(sb::max_slices_for(132), 396);
}

// Every unit in exactly one working block's range, which block_of finds; no range is empty (an
// empty GEMM1 span would put the block's m-block table at slice 0).
std::string partition(int grid, int n, int per) {
  const int G = sb::working_blocks(grid, n);
  const long long units = static_cast<long long>(n) * per;
  if (sb::range_lo(0, units, G) != 0 || sb::range_lo(G, units, G) != units)
    return "ends " + at(grid, n, per, -1, -1);
  std::vector<int> owners(units, 0);
  for (int b = 0; b < G; ++b) {
    const long long lo = sb::range_lo(b, units, G), hi = sb::range_lo(b + 1, units, G);
    if (hi <= lo) return "empty range " + at(grid, n, per, b, -1);
    for (long long x = lo; x < hi; ++x) {
      ++owners[x];
      if (sb::block_of(x, units, G) != b)
        return "block_of(" + std::to_string(x) + ") " + at(grid, n, per, b, -1);
    }
  }
  for (long long x = 0; x < units; ++x)
    if (owners[x] != 1) return "unit " + std::to_string(x) + " " + at(grid, n, per, -1, -1);
  return "";
}
TEST(MoeSlicedBalance, RangesPartitionTheUnits) { EXPECT_EQ(for_all(partition), ""); }

// A block's span lists exactly the slices its range touches, whose units, in slice order, are
// its range (the producer and consumers walk them so).
std::string block_spans(int grid, int n, int per) {
  const int G = sb::working_blocks(grid, n);
  const long long units = static_cast<long long>(n) * per;
  for (int b = 0; b < G; ++b) {
    const sb::SliceSpan s = sb::span_of(b, n, per, G);
    if (s.first < 0 || s.last < s.first || s.last >= n)
      return "span " + at(grid, n, per, b, -1);
    long long next = sb::range_lo(b, units, G);
    for (int g = s.first; g <= s.last; ++g) {
      const sb::UnitSpan u = sb::units_of(b, g, n, per, G);
      if (empty(u) || u.lo < 0 || u.hi > per || static_cast<long long>(g) * per + u.lo != next)
        return "units " + at(grid, n, per, b, g);
      next += u.hi - u.lo;
    }
    if (next != sb::range_lo(b + 1, units, G)) return "sum " + at(grid, n, per, b, -1);
    // The slices just outside the span are none of the block's.
    if (s.first > 0 && !empty(sb::units_of(b, s.first - 1, n, per, G)))
      return "before span " + at(grid, n, per, b, s.first - 1);
    if (s.last + 1 < n && !empty(sb::units_of(b, s.last + 1, n, per, G)))
      return "after span " + at(grid, n, per, b, s.last + 1);
  }
  return "";
}
TEST(MoeSlicedBalance, BlockSpansWalkTheRange) { EXPECT_EQ(for_all(block_spans), ""); }

// A slice's holders are exactly the blocks with some of its units, tiling [0, per) in order;
// with several holders each one's share is cut (each arrives once at the slice's count), with
// one it is whole (no exchange).
std::string slice_holders(int grid, int n, int per) {
  const int G = sb::working_blocks(grid, n);
  for (int g = 0; g < n; ++g) {
    const sb::SliceSpan h = sb::holders_of(g, n, per, G);
    if (h.first < 0 || h.last < h.first || h.last >= G)
      return "holders " + at(grid, n, per, -1, g);
    int next = 0;
    for (int b = 0; b < G; ++b) {
      const sb::UnitSpan u = sb::units_of(b, g, n, per, G);
      if (b < h.first || b > h.last) {
        if (!empty(u)) return "not a holder " + at(grid, n, per, b, g);
        continue;
      }
      if (empty(u) || u.lo != next) return "holder " + at(grid, n, per, b, g);
      if (whole(u, per) != (h.first == h.last)) return "cut " + at(grid, n, per, b, g);
      next = u.hi;
    }
    if (next != per) return "tiling " + at(grid, n, per, -1, g);
  }
  return "";
}
TEST(MoeSlicedBalance, SliceHoldersTileTheSlice) { EXPECT_EQ(for_all(slice_holders), ""); }

// GEMM2's span starts at GEMM1's first slice (the m-block tables start there) and both spans
// together, and their m-blocks of NS slices, fit kMaxBlockSlices (the kernel traps past it).
TEST(MoeSlicedBalance, BlockSlicesAndMBlocksFitTheTables) {
  int most = 0;
  for (int ku1 : kKu1s)
    for (int grid : kGrids)
      for (int n = 1; n <= sb::max_slices_for(grid); ++n) {
        const int G = sb::working_blocks(grid, n);
        for (int b = 0; b < G; ++b) {
          const sb::SliceSpan s1 = sb::span_of(b, n, ku1, G), s2 = sb::span_of(b, n, ku1 / 2, G);
          ASSERT_EQ(s1.first, s2.first) << at(grid, n, ku1, b, -1);
          ASSERT_LE(s1.first, s1.last) << at(grid, n, ku1, b, -1);
          ASSERT_LE(s2.first, s2.last) << at(grid, n, ku1, b, -1);
          const int last = std::max(s1.last, s2.last);
          ASSERT_LE(last - s1.first + 1, sb::kMaxBlockSlices) << at(grid, n, ku1, b, -1);
          most = std::max(most, last - s1.first + 1);
          for (int ns : {1, 2, 4})
            ASSERT_LE(last / ns - s1.first / ns + 1, sb::kMaxBlockSlices)
                << "NS " << ns << " " << at(grid, n, ku1, b, -1);
        }
      }
  EXPECT_EQ(most, sb::kMaxSlicesPerSm + 1);  // up to 3 slices of units, cut: 4 slices
  // Past max_slices_for the bound does not hold: one block with 6 slices touches 6.
  EXPECT_EQ(sb::span_of(0, 6, kQwenKu1, sb::working_blocks(1, 6)).last + 1, 6);
}

// A block's cut slices are only its first and last, so its two partial places (2b: first, 2b+1:
// last) hold them without collision, within the exchange buffer's 2 x grid.
std::string partial_places(int grid, int n, int per) {
  const int G = sb::working_blocks(grid, n);
  std::vector<int> used(2 * grid, 0);
  for (int b = 0; b < G; ++b) {
    const sb::SliceSpan s = sb::span_of(b, n, per, G);
    int cuts = 0;
    for (int g = s.first; g <= s.last; ++g) {
      if (whole(sb::units_of(b, g, n, per, G), per)) continue;
      ++cuts;
      if (g != s.first && g != s.last) return "middle cut " + at(grid, n, per, b, g);
      const int i = sb::partial_index(b, g, n, per, G);
      if (i != 2 * b + (g == s.first ? 0 : 1)) return "index " + at(grid, n, per, b, g);
      if (used[i]++ != 0) return "collision " + at(grid, n, per, b, g);
    }
    if (cuts > 2) return "cuts " + at(grid, n, per, b, -1);
  }
  return "";
}
TEST(MoeSlicedBalance, PartialPlacesAreUnique) { EXPECT_EQ(for_all(partial_places), ""); }

// Sizes by hand: a partial is 256 consumer threads x 16 fp32; an activation is [16][128] e4m3
// and 16 fp32 scales.
TEST(MoeSlicedBalance, ExchangeAndCounterSizes) {
  EXPECT_EQ(sb::kPartialBytes, 16384);
  EXPECT_EQ(sb::kActBytes, 2048 + 64);
  EXPECT_EQ(sb::exchange_bytes(132, 396), 2LL * 132 * 16384 + 396LL * 2112);
  EXPECT_EQ(sb::exchange_bytes(132, 396), 5161728);
  EXPECT_EQ(sb::exchange_bytes(1, 3), 2 * 16384 + 3 * 2112);
  // Three per slice: GEMM1 arrivals, the ready flag, GEMM2 loads (each cleared by its last user).
  EXPECT_EQ(sb::counter_ints(396), 3 + 3 * 396);
  EXPECT_EQ(sb::counter_ints(3), 12);
}

// The kernel's shared memory, laid out as it carves it: ring, activation tile, two out tiles,
// slot scales, activation scales, kMaxBlockSlices slot tables, 8 experts, 4 misc ints, then the
// full and empty mbarriers (8-byte aligned).
TEST(MoeSlicedBalance, SharedMemoryMatchesTheKernelsLayout) {
  for (int s = sp::kMinStages; s <= sp::kMaxStages; ++s) {
    int off = s * sp::kStageBytes + sp::kActTileBytes + 2 * sp::kBlockM * sp::kOutRowBytes;
    off += s * sp::kSlotScales * 4 + sp::kBlockM * 4;
    off += sb::kMaxBlockSlices * sp::kBlockM * 4 + 8 * 4 + 4 * 4;
    EXPECT_EQ(off % 8, 0) << s;
    EXPECT_EQ(off + 2 * s * 8, sb::smem_bytes(s)) << s;
    EXPECT_LE(sb::smem_bytes(s), 232448) << s;
  }
  // By hand at 5 stages: 5 x 36 KB ring, 2 KB, 2 x 16 x 528, 5 x 160, 64, 5 x 64, 32, 16, 80.
  EXPECT_EQ(sb::smem_bytes(5), 184320 + 2048 + 16896 + 800 + 64 + 320 + 32 + 16 + 80);
  EXPECT_EQ(sb::smem_bytes(5), 204576);
  EXPECT_EQ(sb::smem_bytes(5) - 80, 204496);  // the mbarriers' offset
  EXPECT_EQ(sb::smem_bytes(5) - sp::smem_bytes(5), 5 * 64 + 32 - 64);
}

}  // namespace
}  // namespace moetune
