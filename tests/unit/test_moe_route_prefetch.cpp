// The routing's L2 prefetch plan (moe::route_prefetch_plan) and the boxes its kernel asks for
// (route_prefetch_box, the function kernels/routing.cuh calls): no GPU needed.
#include <array>
#include <cstdint>
#include <set>
#include <utility>

#include <gtest/gtest.h>

#include "kernels/common/route_prefetch.cuh"
#include "moe/stages.hpp"

namespace moetune::moe {
namespace {

// Qwen3.5-122B-A10B at TP4: 256 experts, K = 3072, N = 1024 / 4.
MoeShape qwen_tp4(Dtype d) {
  MoeShape s;
  s.E = s.E_global = 256;
  s.N = 256;
  s.K = 3072;
  s.topk = 8;
  s.dtype = d;
  if (d == Dtype::fp8_w8a8) s.block_shape = std::array<int, 2>{128, 128};
  return s;
}

TEST(MoeRoutePrefetch, PlanOfBlockFp8AtDecode) {
  const RoutePrefetch p = route_prefetch_plan(qwen_tp4(Dtype::fp8_w8a8), 0, 4, 1);
  EXPECT_EQ(p.rows, 512);
  EXPECT_EQ(p.box_rows, 256);
  EXPECT_EQ(p.lines, 4);
  EXPECT_EQ(p.splits, 1);
  EXPECT_EQ(p.split_bytes, 3072);
  EXPECT_EQ(p.expert_start, 0);
  EXPECT_EQ(p.local_experts, 256);
  EXPECT_EQ(route_prefetch_row_boxes(p), 2);
  EXPECT_EQ(route_prefetch_boxes_per_expert(p), 8);
  EXPECT_EQ(alignof(RoutePrefetch), 64u);  // the tensor map's alignment, as a kernel parameter
  EXPECT_EQ(sizeof(RoutePrefetchMap), 128u);
}

TEST(MoeRoutePrefetch, PlanClampsLinesToASplit) {
  const MoeShape f8 = qwen_tp4(Dtype::fp8_w8a8);
  EXPECT_EQ(route_prefetch_plan(f8, 0, 1000, 1).lines, 24);  // 3072 / 128
  const RoutePrefetch two = route_prefetch_plan(f8, 0, 1000, 2);
  EXPECT_EQ(two.lines, 12);
  EXPECT_EQ(two.splits, 2);
  EXPECT_EQ(two.split_bytes, 1536);
  // bf16 rows are twice as long.
  EXPECT_EQ(route_prefetch_plan(qwen_tp4(Dtype::bf16), 0, 1000, 1).lines, 48);
  // Fewer rows than a box holds: one box of all of them.
  MoeShape narrow = f8;
  narrow.N = 64;
  const RoutePrefetch n = route_prefetch_plan(narrow, 0, 2, 1);
  EXPECT_EQ(n.box_rows, 128);
  EXPECT_EQ(route_prefetch_row_boxes(n), 1);
}

TEST(MoeRoutePrefetch, NoPrefetchWithoutLines) {
  const MoeShape f8 = qwen_tp4(Dtype::fp8_w8a8);
  EXPECT_EQ(route_prefetch_plan(f8, 0, 0, 1).lines, 0);
  MoeShape tiny = f8;
  tiny.K = 64;  // rows shorter than a line
  EXPECT_EQ(route_prefetch_plan(tiny, 0, 4, 1).lines, 0);
  // Without weights the map is never encoded (no driver call) and the prefetch is off.
  EXPECT_EQ(route_prefetch_encode(route_prefetch_plan(f8, 0, 4, 1), f8, nullptr).lines, 0);
}

TEST(MoeRoutePrefetch, ExpertParallelRankStartsAtItsExperts) {
  MoeShape s = qwen_tp4(Dtype::fp8_w8a8);
  s.E = 128;  // EP 2
  s.ep = 2;
  const RoutePrefetch p = route_prefetch_plan(s, 1, 2, 1);
  EXPECT_EQ(p.expert_start, 128);
  EXPECT_EQ(p.local_experts, 128);
}

// The boxes the kernel asks for are distinct, start on a 128-byte column at the start of a row
// or of a split of it, start inside the expert's rows, and together cover exactly each row's
// first `lines` columns of each split; the first column of every row comes first.
TEST(MoeRoutePrefetch, BoxesCoverEachRowsFirstColumnsOnce) {
  MoeShape s = qwen_tp4(Dtype::fp8_w8a8);
  s.K = 1024;
  for (int n : {256, 320, 64}) {  // rows 512 (two boxes), 640 (three, the last short), 128
    s.N = n;
    for (int split_k : {1, 2, 4}) {
      const RoutePrefetch p = route_prefetch_plan(s, 0, 3, split_k);
      ASSERT_EQ(p.lines, split_k == 4 ? 2 : 3);  // a split of 256 bytes holds 2 lines
      const int e = 5;
      std::set<std::pair<int, int>> got;  // (column, row) of each box's first element
      std::set<std::pair<int, int>> covered, want;
      for (int r = 0; r < p.rows; ++r)
        for (int sp = 0; sp < p.splits; ++sp)
          for (int j = 0; j < p.lines; ++j) want.emplace(sp * p.split_bytes + 128 * j, r);
      const int nb = route_prefetch_boxes_per_expert(p);
      for (int i = 0; i < nb; ++i) {
        int col = -1, row = -1;
        route_prefetch_box(p, e, i, col, row);
        EXPECT_EQ(col % 128, 0) << i;
        EXPECT_GE(row, e * p.rows) << i;
        EXPECT_LT(row, (e + 1) * p.rows) << i;
        if (i < route_prefetch_row_boxes(p)) {
          EXPECT_EQ(col, 0) << i;
        }
        EXPECT_TRUE(got.emplace(col, row).second) << "box " << i << " asked twice";
        for (int r = row; r < row + p.box_rows && r < (e + 1) * p.rows; ++r)
          covered.emplace(col, r - e * p.rows);
      }
      EXPECT_EQ(covered, want) << "N " << n << " split_k " << split_k;
    }
  }
}

}  // namespace
}  // namespace moetune::moe
