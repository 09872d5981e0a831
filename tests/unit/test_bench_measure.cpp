// The measurement phases on a synthetic ReplayDevice: R selection, warm-up, stopping rules and
// throttle flags, with known numbers (no GPU).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "bench/measure.hpp"
#include "moetune/error.hpp"

using moetune::bench::choose_calls_per_replay;
using moetune::bench::MeasureOptions;
using moetune::bench::ReplayDevice;
using moetune::bench::Samples;

namespace {

// One call takes call_s on the GPU (plus launch_gap_s when eager); replays get multiplicative
// noise of relative size `noise`; the clock follows `clock_of(batch)`.
class FakeDevice : public ReplayDevice {
 public:
  double call_s = 10e-6, launch_gap_s = 4e-6, noise = 0.0, default_mhz = 1980;
  std::function<double(int)> clock_of = [](int) { return 1980.0; };
  std::vector<std::vector<int>> captures;
  int replays = 0, batches = 0, eager_calls = 0;

  double time_eager(const std::vector<int>& idx) override {
    eager_calls += static_cast<int>(idx.size());
    return static_cast<double>(idx.size()) * (call_s + launch_gap_s);
  }
  void capture(const std::vector<int>& idx) override { captures.push_back(idx); }
  std::vector<double> replay(int count, double* clock_mhz) override {
    std::vector<double> t;
    for (int i = 0; i < count; ++i) {
      double r = noise > 0 ? 1 + noise * normal_(rng_) : 1;
      t.push_back(static_cast<double>(captures.back().size()) * call_s * r);
    }
    replays += count;
    if (clock_mhz) *clock_mhz = clock_of(batches);
    ++batches;
    return t;
  }
  double default_clock_mhz() override { return default_mhz; }

 private:
  std::mt19937_64 rng_{42};
  std::normal_distribution<double> normal_{0.0, 1.0};
};

}  // namespace

TEST(BenchMeasure, ChooseCallsPerReplay) {
  MeasureOptions o;                                  // rotation 16, min 16, target 200 us, max 1024
  EXPECT_EQ(choose_calls_per_replay(50e-6, o), 16);  // 16 calls = 800 us already
  EXPECT_EQ(choose_calls_per_replay(12.5e-6, o), 16);  // exactly 200 us
  EXPECT_EQ(choose_calls_per_replay(10e-6, o), 32);    // 20 needed -> next multiple of 16
  EXPECT_EQ(choose_calls_per_replay(1e-6, o), 208);    // 200 -> 208
  EXPECT_EQ(choose_calls_per_replay(1e-9, o), 1024);   // capped
  EXPECT_EQ(choose_calls_per_replay(0.0, o), 1024);    // unknown: longest allowed
  o.rotation = 24;
  EXPECT_EQ(choose_calls_per_replay(50e-6, o), 24);   // one full rotation at least
  EXPECT_EQ(choose_calls_per_replay(1e-9, o), 1008);  // cap rounded down to 42 rotations
  o.hot = true;                                       // hot: any R
  EXPECT_EQ(choose_calls_per_replay(10e-6, o), 20);
  EXPECT_EQ(choose_calls_per_replay(50e-6, o), 16);
}

TEST(BenchMeasure, ReplayIndicesRotateOrStayHot) {
  MeasureOptions o;
  o.rotation = 3;
  EXPECT_EQ(moetune::bench::replay_call_indices(7, o), (std::vector<int>{0, 1, 2, 0, 1, 2, 0}));
  o.hot = true;
  EXPECT_EQ(moetune::bench::replay_call_indices(3, o), (std::vector<int>{0, 0, 0}));
}

TEST(BenchMeasure, NoiselessStopsStableAtMinimum) {
  FakeDevice dev;
  MeasureOptions o;
  o.batch_replays = 5;
  Samples s = moetune::bench::measure_with(dev, o);
  // Probe at 14 us/call -> R = 16 (224 us); a replay shows 10 us/call -> R = 32 (320 us).
  EXPECT_NEAR(s.probe_call_s, 14e-6, 1e-12);
  EXPECT_EQ(s.calls_per_replay, 32);
  ASSERT_EQ(dev.captures.size(), 2u);
  EXPECT_EQ(dev.captures[0].size(), 16u);
  EXPECT_EQ(dev.captures[1].size(), 32u);
  EXPECT_EQ(dev.captures[1][17], 1);  // rotation of 16
  EXPECT_EQ(dev.eager_calls, 32);     // two passes over the rotation
  EXPECT_EQ(s.stop_reason, "stable");
  EXPECT_EQ(s.per_call_s.size(), 10u);  // min_replays
  for (double t : s.per_call_s) EXPECT_DOUBLE_EQ(t, 10e-6);
  // Warm-up: >= 3 replays and >= 20 ms of GPU time at 320 us a replay -> 63 (13 batches of 5).
  EXPECT_EQ(s.warmup_replays, 65);
  EXPECT_DOUBLE_EQ(s.summary().median_s, 10e-6);
  EXPECT_EQ(s.clock.throttled, 0);
  EXPECT_DOUBLE_EQ(s.clock.median_mhz, 1980);
}

TEST(BenchMeasure, NoisyRunsLongerButStops) {
  FakeDevice dev;
  dev.noise = 0.03;  // 3% per replay: the median's relative SE reaches 0.5% after ~50 replays
  MeasureOptions o;
  o.warmup_min_s = 0;
  Samples s = moetune::bench::measure_with(dev, o);
  EXPECT_EQ(s.stop_reason, "stable");
  EXPECT_GT(s.per_call_s.size(), 30u);
  EXPECT_LT(s.per_call_s.size(), 120u);
  EXPECT_NEAR(s.summary().median_s, 10e-6, 0.2e-6);
  EXPECT_EQ(s.warmup_replays, 10);  // one batch covers the 3 required
}

TEST(BenchMeasure, VeryNoisyHitsReplayCap) {
  FakeDevice dev;
  dev.noise = 0.5;
  MeasureOptions o;
  o.warmup_min_s = 0;
  o.max_replays = 40;
  Samples s = moetune::bench::measure_with(dev, o);
  EXPECT_EQ(s.stop_reason, "max_replays");
  EXPECT_EQ(s.per_call_s.size(), 40u);
}

TEST(BenchMeasure, ThrottledSamplesFlaggedAndDropped) {
  FakeDevice dev;
  // One warm-up batch (10 replays), then timed batches: the first timed batch runs throttled,
  // so it cannot count towards stability and a second batch is needed.
  MeasureOptions o;
  o.warmup_min_s = 0;
  o.calls_per_replay = 16;  // fixed R: no re-probe replay
  int warm_batches = 1;
  dev.clock_of = [&](int batch) { return batch == warm_batches ? 1000.0 : 1980.0; };
  Samples s = moetune::bench::measure_with(dev, o);
  EXPECT_EQ(s.calls_per_replay, 16);
  ASSERT_EQ(dev.captures.size(), 1u);
  EXPECT_EQ(s.per_call_s.size(), 20u);
  EXPECT_EQ(s.stop_reason, "stable");
  EXPECT_EQ(s.clock.throttled, 10);
  EXPECT_DOUBLE_EQ(s.clock.min_mhz, 1000);
  EXPECT_EQ(s.kept_s().size(), 10u);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(s.throttled[i], i < 10) << i;
  EXPECT_DOUBLE_EQ(s.clock.median_mhz, (1000.0 + 1980.0) / 2);
}

TEST(BenchMeasure, UnknownClockFlagsNothing) {
  FakeDevice dev;
  dev.default_mhz = 0;
  dev.clock_of = [](int) { return 0.0; };
  MeasureOptions o;
  o.warmup_min_s = 0;
  Samples s = moetune::bench::measure_with(dev, o);
  EXPECT_EQ(s.clock.throttled, 0);
  EXPECT_EQ(s.clock.median_mhz, 0);
  EXPECT_EQ(s.kept_s().size(), s.per_call_s.size());
}

TEST(BenchMeasure, RejectsNonsense) {
  FakeDevice dev;
  MeasureOptions o;
  o.max_replays = 5;  // below min_replays
  EXPECT_THROW(moetune::bench::measure_with(dev, o), moetune::InputError);
  o = {};
  o.rotation = 0;
  EXPECT_THROW(moetune::bench::measure_with(dev, o), moetune::InputError);
}
