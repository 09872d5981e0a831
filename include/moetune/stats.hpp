// Statistics of timing samples, pure functions (no GPU): median, percentiles, bootstrap CIs and
// the three-way verdict faster / slower / within noise from the CI of the ratio of medians.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace moetune {

struct Summary {
  int n = 0;
  double median_s = 0;
  double ci95_lo_s = 0, ci95_hi_s = 0;  // percentile bootstrap CI of the median
  double p10_s = 0, p90_s = 0;
  double mean_s = 0, stdev_s = 0;
  double rel_stdev = 0;                 // stdev / mean
};

inline constexpr int kBootstrapResamples = 2000;
inline constexpr std::uint64_t kBootstrapSeed = 0x6d6f6574756e65ULL;  // fixed: reproducible CIs

// All functions throw InputError for an empty sample set or a non-finite sample.
double median(std::vector<double> v);
double percentile(std::vector<double> v, double p);  // p in [0, 100], linear interpolation
// Deterministic: the bootstrap uses kBootstrapResamples resamples from kBootstrapSeed.
Summary summarize(const std::vector<double>& samples_s);

enum class Verdict { faster, slower, within_noise };
std::string to_string(Verdict v);  // "faster", "slower", "within noise"

struct Comparison {
  double ratio = 1;                  // median(a) / median(b)
  double ci95_lo = 1, ci95_hi = 1;   // percentile bootstrap CI of that ratio
  Verdict verdict = Verdict::within_noise;  // a vs b: faster when the whole CI is below 1
};
// Compares candidate a against b from their per-replay times (seconds).
// a and b are resampled independently; deterministic (fixed seed). With fewer than
// kMinVerdictSamples on either side the verdict is within_noise whatever the CI says: the
// bootstrap of a 2-sample median called equal candidates "faster" 16% of the time, not 2.5%
// (4% at 4 samples, 1.3-2.8% from 8 on; a simulation in the tuner's review, fifth session).
inline constexpr std::size_t kMinVerdictSamples = 5;
Comparison compare(const std::vector<double>& a_s, const std::vector<double>& b_s);

// --- noise-aware stopping -------------------------------------------------------------------
// Relative standard error of the median estimate: sqrt(pi/2) * sigma / sqrt(n) / median, with
// sigma = 1.4826 * MAD (robust to a few outliers). Unlike the samples' own relative stdev, it
// shrinks as samples accumulate, so a noisy candidate still converges.
double median_rel_stderr(const std::vector<double>& samples_s);
// Stop measuring once n >= min_n and median_rel_stderr < rel_tol. nvbench's stdrel criterion
// uses the same 0.5% tolerance and 10-sample minimum on the samples' relative stdev
// (Summary::rel_stdev); we apply it to the median estimate, which is what the CI is about.
bool is_stable(const std::vector<double>& samples_s, double rel_tol = 0.005, int min_n = 10);

// --- clock throttling -----------------------------------------------------------------------
// A sample taken below 75% of the default SM clock is throttled (nvbench's rule) and dropped.
inline constexpr double kThrottleFraction = 0.75;
inline bool is_throttled(double clock_MHz, double default_MHz) {
  return clock_MHz < kThrottleFraction * default_MHz;
}
// The times whose SM clock (one per sample) was not throttled, in order. InputError if the
// sizes differ or default_MHz <= 0.
std::vector<double> drop_throttled(const std::vector<double>& times_s,
                                   const std::vector<double>& clocks_MHz, double default_MHz);

}  // namespace moetune
