#include "moetune/stats.hpp"

#include <time.h>

#include <cmath>
#include <cstdint>
#include <numeric>

#include <gtest/gtest.h>

#include "moetune/error.hpp"
#include "perf/splitmix64.hpp"

namespace moetune {
namespace {

// Synthetic timings from our own generator (std::normal_distribution differs between standard
// libraries): splitmix64 uniforms, Box-Muller normals.
class Synth {
 public:
  explicit Synth(std::uint64_t seed) : x_(seed) {}
  double uniform() {  // (0, 1)
    return (static_cast<double>(splitmix64_next(x_) >> 11) + 0.5) / 9007199254740992.0;
  }
  double normal() {
    return std::sqrt(-2 * std::log(uniform())) * std::cos(6.283185307179586 * uniform());
  }
  // n times around median_s with relative noise rel_sigma (normal body).
  std::vector<double> times(int n, double median_s, double rel_sigma) {
    std::vector<double> v(n);
    for (double& t : v) t = median_s * (1 + rel_sigma * normal());
    return v;
  }

 private:
  std::uint64_t x_;
};

// The reference sequence of splitmix64.c (Vigna) from state 0: check, bench, the tuner's inputs
// and its synthetic noise all draw from it, so a changed constant would silently change every seed.
TEST(SplitMix64, MatchesTheReferenceSequence) {
  SplitMix64 r{0};
  EXPECT_EQ(r.next(), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(r.next(), 0x6e789e6aa1b965f4ULL);
  EXPECT_EQ(r.next(), 0x06c45d188009454fULL);
  EXPECT_EQ(r.s, 3 * 0x9e3779b97f4a7c15ULL);
  SplitMix64 v{0};  // uniform() is the top 53 bits over 2^53: pin its arithmetic too
  EXPECT_EQ(v.uniform(), static_cast<double>(0xe220a8397b1dcdafULL >> 11) / 9007199254740992.0);
  EXPECT_DOUBLE_EQ(SplitMix64{0}.uniform(), 0.8833108082136426);
  SplitMix64 w{0};
  EXPECT_NEAR(w.normal(), -0.4527577402174582, 1e-15);  // Box-Muller over the first two uniforms
  SplitMix64 u{42};
  for (int i = 0; i < 1000; ++i) {
    const double x = u.uniform();
    ASSERT_GE(x, 0.0);
    ASSERT_LT(x, 1.0);
  }
}

TEST(Stats, MedianOddAndEven) {
  EXPECT_DOUBLE_EQ(median({5, 1, 3}), 3);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(median({7}), 7);
  EXPECT_DOUBLE_EQ(median({2, 2, 9, 2}), 2);
}

TEST(Stats, PercentileInterpolatesLinearly) {
  const std::vector<double> v = {5, 3, 1, 4, 2};
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(percentile(v, 100), 5);
  EXPECT_DOUBLE_EQ(percentile(v, 50), 3);
  EXPECT_DOUBLE_EQ(percentile(v, 10), 1.4);  // rank 0.4 between 1 and 2
  EXPECT_DOUBLE_EQ(percentile(v, 90), 4.6);
  EXPECT_DOUBLE_EQ(percentile({40, 10, 30, 20}, 25), 17.5);  // rank 0.75 (numpy's default)
  EXPECT_THROW(percentile(v, 101), InputError);
  EXPECT_THROW(percentile(v, -1), InputError);
}

TEST(Stats, RejectsEmptyAndNonFinite) {
  EXPECT_THROW(median({}), InputError);
  EXPECT_THROW(summarize({}), InputError);
  EXPECT_THROW(summarize({1.0, std::nan("")}), InputError);
  EXPECT_THROW(compare({1.0}, {}), InputError);
  try {
    compare({}, {1.0});
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "a");
  }
}

TEST(Stats, SummarizeKnownSample) {
  std::vector<double> v(101);
  std::iota(v.begin(), v.end(), 1.0);  // 1..101
  const Summary s = summarize(v);
  EXPECT_EQ(s.n, 101);
  EXPECT_DOUBLE_EQ(s.median_s, 51);
  EXPECT_DOUBLE_EQ(s.p10_s, 11);
  EXPECT_DOUBLE_EQ(s.p90_s, 91);
  EXPECT_DOUBLE_EQ(s.mean_s, 51);
  EXPECT_NEAR(s.stdev_s, std::sqrt(858.5), 1e-12);  // sum of squared deviations 85,850 / 100
  EXPECT_NEAR(s.rel_stdev, std::sqrt(858.5) / 51, 1e-12);
  EXPECT_LT(s.ci95_lo_s, 51);
  EXPECT_GT(s.ci95_hi_s, 51);
  // The median's bootstrap spread for a uniform 1..101: about 1.96 * sqrt(pi/2) * 29.3 / 10.
  EXPECT_GT(s.ci95_hi_s - s.ci95_lo_s, 5);
  EXPECT_LT(s.ci95_hi_s - s.ci95_lo_s, 25);
}

TEST(Stats, SummarizeSingleSample) {
  const Summary s = summarize({3e-6});
  EXPECT_EQ(s.n, 1);
  EXPECT_DOUBLE_EQ(s.median_s, 3e-6);
  EXPECT_DOUBLE_EQ(s.ci95_lo_s, 3e-6);
  EXPECT_DOUBLE_EQ(s.ci95_hi_s, 3e-6);
  EXPECT_DOUBLE_EQ(s.stdev_s, 0);
}

TEST(Stats, ConfidenceIntervalCoversTheTrueMedian) {
  // One large sample: the CI contains the true median and is narrow.
  Synth big(1);
  const Summary s = summarize(big.times(2000, 100e-6, 0.03));
  EXPECT_LE(s.ci95_lo_s, 100e-6);
  EXPECT_GE(s.ci95_hi_s, 100e-6);
  EXPECT_LT((s.ci95_hi_s - s.ci95_lo_s) / s.median_s, 0.01);
  // Many samples: a 95% CI misses in about 1 of 20; allow 3.
  int covered = 0;
  for (std::uint64_t seed = 10; seed < 30; ++seed) {
    Synth g(seed);
    const Summary t = summarize(g.times(300, 50e-6, 0.05));
    covered += (t.ci95_lo_s <= 50e-6 && 50e-6 <= t.ci95_hi_s);
  }
  EXPECT_GE(covered, 17);
}

TEST(Stats, CompareClearlyFaster) {
  Synth g(42);
  const auto fast = g.times(200, 90e-6, 0.02);
  const auto slow = g.times(200, 100e-6, 0.02);
  const Comparison c = compare(fast, slow);
  EXPECT_NEAR(c.ratio, 0.9, 0.01);
  EXPECT_LT(c.ci95_lo, c.ratio);
  EXPECT_GT(c.ci95_hi, c.ratio);
  EXPECT_LT(c.ci95_hi, 1);
  EXPECT_EQ(c.verdict, Verdict::faster);
  EXPECT_EQ(to_string(c.verdict), "faster");

  const Comparison r = compare(slow, fast);  // the reverse
  EXPECT_NEAR(r.ratio, 1 / 0.9, 0.015);
  EXPECT_GT(r.ci95_lo, 1);
  EXPECT_EQ(r.verdict, Verdict::slower);
  EXPECT_EQ(to_string(r.verdict), "slower");
}

TEST(Stats, CompareSameDistributionIsWithinNoise) {
  // Two draws of the same distribution: within noise in about 19 of 20 pairs.
  int within = 0;
  for (std::uint64_t seed = 100; seed < 120; ++seed) {
    Synth g(seed);
    const auto a = g.times(150, 100e-6, 0.03);
    const auto b = g.times(150, 100e-6, 0.03);
    const Comparison c = compare(a, b);
    EXPECT_NEAR(c.ratio, 1, 0.02);
    within += c.verdict == Verdict::within_noise;
  }
  EXPECT_GE(within, 17);
  EXPECT_EQ(to_string(Verdict::within_noise), "within noise");
}

TEST(Stats, SmallDifferenceInLargeNoiseIsWithinNoise) {
  Synth g(7);
  const auto a = g.times(30, 99e-6, 0.10);
  const auto b = g.times(30, 100e-6, 0.10);
  EXPECT_EQ(compare(a, b).verdict, Verdict::within_noise);
}

TEST(Stats, Deterministic) {
  Synth g(3);
  const auto a = g.times(257, 10e-6, 0.05);
  const auto b = g.times(311, 11e-6, 0.05);
  const Comparison c1 = compare(a, b), c2 = compare(a, b);
  EXPECT_EQ(c1.ci95_lo, c2.ci95_lo);
  EXPECT_EQ(c1.ci95_hi, c2.ci95_hi);
  const Summary s1 = summarize(a), s2 = summarize(a);
  EXPECT_EQ(s1.ci95_lo_s, s2.ci95_lo_s);
  EXPECT_EQ(s1.ci95_hi_s, s2.ci95_hi_s);
}

TEST(Stats, BootstrapIsFast) {
  Synth g(5);
  const auto a = g.times(400, 10e-6, 0.05);
  const auto b = g.times(400, 10e-6, 0.05);
  // CPU time of this thread, not wall time: ctest -j runs other tests beside this one, and on a
  // 2-core CI machine the wall time of the same work passed 0.1 s (0.117 s) while its CPU time
  // did not.
  const auto cpu_s = [] {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
  };
  const double t0 = cpu_s();
  compare(a, b);
  summarize(a);
  const double elapsed_s = cpu_s() - t0;
  // Both together take about 50 ms of CPU in a release build; 0.2 s leaves room for a busy
  // core (CPU time of a thread sharing a core with others grows too) and still catches a
  // bootstrap that became several times slower.
  EXPECT_LT(elapsed_s, 0.2);
}

TEST(Stats, MedianRelStderr) {
  // median 3, MAD 1: sqrt(pi/2) * 1.4826 * 1 / sqrt(5) / 3
  EXPECT_NEAR(median_rel_stderr({1, 2, 3, 4, 5}), 0.27699866591438566, 1e-12);
  // An outlier moves neither the median nor the MAD.
  EXPECT_NEAR(median_rel_stderr({1, 2, 3, 4, 500}), 0.27699866591438566, 1e-12);
}

TEST(Stats, IsStable) {
  Synth g(9);
  const auto quiet = g.times(50, 20e-6, 0.002);
  EXPECT_TRUE(is_stable(quiet));
  EXPECT_FALSE(is_stable(std::vector<double>(quiet.begin(), quiet.begin() + 9)));  // < min_n
  EXPECT_TRUE(is_stable(std::vector<double>(quiet.begin(), quiet.begin() + 9), 0.005, 5));
  const auto noisy = g.times(50, 20e-6, 0.10);
  EXPECT_FALSE(is_stable(noisy));
  // The median estimate tightens with n even when each sample stays noisy.
  const auto many = g.times(2000, 20e-6, 0.05);
  EXPECT_TRUE(is_stable(many));
  EXPECT_GT(summarize(many).rel_stdev, 0.04);
}

TEST(Stats, DropThrottled) {
  // 75% of 1980 MHz = 1485 MHz: 1400 and 1000 are throttled, 1485 is not.
  const auto kept = drop_throttled({1, 2, 3, 4}, {1980, 1400, 1485, 1000}, 1980);
  EXPECT_EQ(kept, (std::vector<double>{1, 3}));
  EXPECT_TRUE(is_throttled(1484, 1980));
  EXPECT_FALSE(is_throttled(1485, 1980));
  EXPECT_THROW(drop_throttled({1, 2}, {1980}, 1980), InputError);
  EXPECT_THROW(drop_throttled({1}, {1980}, 0), InputError);
}

}  // namespace
}  // namespace moetune
