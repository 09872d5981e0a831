#include "moe/parallel.hpp"

#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

namespace moetune::moe {
namespace {

using Range = std::tuple<std::int64_t, std::int64_t, std::uint64_t>;

std::set<Range> ranges(std::int64_t n, int chunks, int threads) {
  std::mutex m;
  std::set<Range> out;
  parallel_chunks(n, chunks, [&](std::int64_t lo, std::int64_t hi, std::uint64_t c) {
    std::lock_guard<std::mutex> lock(m);
    out.emplace(lo, hi, c);
  }, threads);
  return out;
}

// check and bench seed each chunk from its index: the split must not depend on the threads.
TEST(MoeParallel, ChunksDependOnNAndChunksOnly) {
  for (std::int64_t n : {0, 1, 15, 16, 17, 1000, 4096 * 7168 + 3}) {
    const auto one = ranges(n, kSeedChunks, 1);
    EXPECT_EQ(one, ranges(n, kSeedChunks, 3)) << n;
    EXPECT_EQ(one, ranges(n, kSeedChunks, 64)) << n;
    std::int64_t covered = 0, expect_lo = 0;
    for (const auto& [lo, hi, c] : one) {  // ordered by lo: contiguous, in index order
      EXPECT_EQ(lo, expect_lo);
      EXPECT_EQ(c, static_cast<std::uint64_t>(lo / ((n + kSeedChunks - 1) / kSeedChunks)));
      covered += hi - lo;
      expect_lo = hi;
    }
    EXPECT_EQ(covered, n);
    EXPECT_LE(one.size(), static_cast<std::size_t>(kSeedChunks));
  }
  // The split the device machines' 16 cores gave: 17 elements are 9 chunks of 2 (the last of 1).
  const auto r17 = ranges(17, kSeedChunks, 2);
  ASSERT_EQ(r17.size(), 9u);
  EXPECT_EQ(*r17.rbegin(), Range(16, 17, 8));
}

TEST(MoeParallel, ForVisitsEveryIndexOnce) {
  for (int threads : {0, 1, 5}) {
    std::vector<std::atomic<int>> hits(1001);
    parallel_for(1001, threads, [&](std::int64_t i) { hits[i].fetch_add(1); });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  }
  int calls = 0;
  parallel_for(0, 4, [&](std::int64_t) { ++calls; });
  EXPECT_EQ(calls, 0);
}

}  // namespace
}  // namespace moetune::moe
