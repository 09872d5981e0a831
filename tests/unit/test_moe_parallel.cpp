#include "moe/parallel.hpp"

#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>
#include <stdexcept>
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
  EXPECT_EQ(ranges(5, 0, 2), std::set<Range>{Range(0, 5, 0)});  // chunks < 1 counts as 1
}

// The per-thread split that check and bench used before kSeedChunks, written out on its own: with
// 16 threads it must give exactly the chunks of today's split, so the inputs of the figures
// recorded on the 16-core device machines are unchanged.
std::set<Range> old_per_thread_split(std::int64_t n, int threads) {
  std::set<Range> out;
  const std::int64_t chunk = (n + threads - 1) / threads;
  for (int t = 0; t < threads; ++t) {
    const std::int64_t lo = t * chunk, hi = std::min(n, lo + chunk);
    if (lo >= hi) break;
    out.emplace(lo, hi, static_cast<std::uint64_t>(t));
  }
  return out;
}

TEST(MoeParallel, SeedChunksAreTheSixteenCoreSplit) {
  for (std::int64_t n = 0; n < 600; ++n) {
    ASSERT_EQ(ranges(n, kSeedChunks, 4), old_per_thread_split(n, 16)) << n;
  }
  EXPECT_EQ(ranges(256LL * 512 * 7168, kSeedChunks, 3), old_per_thread_split(256LL * 512 * 7168, 16));
  EXPECT_NE(ranges(1000, kSeedChunks, 4), old_per_thread_split(1000, 32));  // why 16 is fixed
}

TEST(MoeParallel, AnExceptionInAnyThreadReachesTheCaller) {
  for (int threads : {1, 4}) {
    std::atomic<int> done{0};
    EXPECT_THROW(parallel_for(10000, threads,
                              [&](std::int64_t i) {
                                if (i == 37) throw std::runtime_error("row 37");
                                done.fetch_add(1);
                              }),
                 std::runtime_error);
    EXPECT_LT(done.load(), 10000);
  }
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
