// The routing's L2 prefetch plan (moe::route_prefetch_plan) and the lines its kernel asks for
// (route_prefetch_offset, the function kernels/routing.cuh calls): no GPU needed.
#include <array>
#include <cstdint>
#include <set>
#include <vector>

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

const void* fake_w13() { return reinterpret_cast<const void*>(std::uintptr_t{1} << 32); }

TEST(MoeRoutePrefetch, PlanOfBlockFp8AtDecode) {
  const RoutePrefetch p = route_prefetch_plan(qwen_tp4(Dtype::fp8_w8a8), 8, 0, fake_w13(), 4, 1, 132);
  EXPECT_EQ(p.w, static_cast<const unsigned char*>(fake_w13()));
  EXPECT_EQ(p.rows, 512);
  EXPECT_EQ(p.row_bytes, 3072);
  EXPECT_EQ(p.expert_bytes, 512LL * 3072);
  EXPECT_EQ(p.lines, 4);
  EXPECT_EQ(p.splits, 1);
  EXPECT_EQ(p.split_bytes, 3072);
  EXPECT_EQ(p.expert_start, 0);
  EXPECT_EQ(p.local_experts, 256);
  EXPECT_EQ(p.slices, 66);  // two routing blocks of 4 tokens, 132 SMs
  EXPECT_EQ(routing_route_blocks(8, p), 132);
  EXPECT_EQ(route_prefetch_lines_per_expert(p), 512 * 4);
}

TEST(MoeRoutePrefetch, PlanClampsLinesToASplitAndSlicesToOne) {
  const MoeShape f8 = qwen_tp4(Dtype::fp8_w8a8);
  EXPECT_EQ(route_prefetch_plan(f8, 8, 0, fake_w13(), 1000, 1, 132).lines, 24);  // 3072 / 128
  const RoutePrefetch two = route_prefetch_plan(f8, 8, 0, fake_w13(), 1000, 2, 132);
  EXPECT_EQ(two.lines, 12);
  EXPECT_EQ(two.splits, 2);
  EXPECT_EQ(two.split_bytes, 1536);
  // bf16 rows are twice as long.
  const RoutePrefetch b = route_prefetch_plan(qwen_tp4(Dtype::bf16), 8, 0, fake_w13(), 1000, 1, 132);
  EXPECT_EQ(b.row_bytes, 6144);
  EXPECT_EQ(b.lines, 48);
  // Past one routing block per SM, no copies; 133 blocks at M = 532.
  EXPECT_EQ(route_prefetch_plan(f8, 4 * 132, 0, fake_w13(), 2, 1, 132).slices, 1);
  EXPECT_EQ(route_prefetch_plan(f8, 532, 0, fake_w13(), 2, 1, 132).slices, 1);
  EXPECT_EQ(route_prefetch_plan(f8, 1, 0, fake_w13(), 2, 1, 132).slices, 132);
}

TEST(MoeRoutePrefetch, NoPrefetchWithoutLinesOrWeights) {
  const MoeShape f8 = qwen_tp4(Dtype::fp8_w8a8);
  for (const RoutePrefetch& p : {route_prefetch_plan(f8, 8, 0, fake_w13(), 0, 1, 132),
                                 route_prefetch_plan(f8, 8, 0, nullptr, 4, 1, 132),
                                 route_prefetch_plan(f8, 0, 0, fake_w13(), 4, 1, 132)}) {
    EXPECT_EQ(p.lines, 0);
    EXPECT_EQ(p.slices, 1);
    EXPECT_EQ(routing_route_blocks(8, p), 2);
  }
  MoeShape tiny = f8;
  tiny.K = 64;  // rows shorter than a line
  EXPECT_EQ(route_prefetch_plan(tiny, 8, 0, fake_w13(), 4, 1, 132).lines, 0);
}

TEST(MoeRoutePrefetch, ExpertParallelRankStartsAtItsExperts) {
  MoeShape s = qwen_tp4(Dtype::fp8_w8a8);
  s.E = 128;  // EP 2
  s.ep = 2;
  const RoutePrefetch p = route_prefetch_plan(s, 8, 1, fake_w13(), 2, 1, 132);
  EXPECT_EQ(p.expert_start, 128);
  EXPECT_EQ(p.local_experts, 128);
}

// Every line the kernel asks for is a distinct line at the start of a row or of a split of
// it, inside the expert's weights, and together they are exactly each row's first `lines` lines
// of each split; the first lines of all rows come first.
TEST(MoeRoutePrefetch, OffsetsCoverEachRowsFirstLinesOnce) {
  MoeShape s = qwen_tp4(Dtype::fp8_w8a8);
  s.N = 24;  // 48 rows
  s.K = 1024;
  for (int split_k : {1, 2, 4}) {
    const RoutePrefetch p = route_prefetch_plan(s, 8, 0, fake_w13(), 3, split_k, 132);
    ASSERT_EQ(p.lines, split_k == 4 ? 2 : 3);  // a split of 256 bytes holds 2 lines
    const int e = 5;
    std::set<long long> got;
    std::set<long long> want;
    for (int r = 0; r < p.rows; ++r)
      for (int sp = 0; sp < p.splits; ++sp)
        for (int j = 0; j < p.lines; ++j)
          want.insert(e * p.expert_bytes + 1LL * r * p.row_bytes + 1LL * sp * p.split_bytes +
                      128LL * j);
    const int n = route_prefetch_lines_per_expert(p);
    for (int i = 0; i < n; ++i) {
      const long long off = route_prefetch_offset(p, e, i);
      EXPECT_EQ(off % 128, 0) << i;
      EXPECT_GE(off, e * p.expert_bytes);
      EXPECT_LT(off, (e + 1) * p.expert_bytes);
      EXPECT_TRUE(got.insert(off).second) << "line " << i << " asked twice";
      if (i < p.rows) {
        EXPECT_EQ((off - e * p.expert_bytes) % p.row_bytes, 0) << i;
      }
    }
    EXPECT_EQ(got, want) << "split_k " << split_k;
  }
}

}  // namespace
}  // namespace moetune::moe
