// Statistics of timing samples, pure functions (no GPU): median, percentiles, bootstrap CIs and
// the three-way verdict faster / slower / within noise from the CI of the ratio of medians.
#pragma once
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

double median(std::vector<double> v);
double percentile(std::vector<double> v, double p);  // p in [0, 100], linear interpolation
Summary summarize(const std::vector<double>& samples_s);

enum class Verdict { faster, slower, within_noise };
std::string to_string(Verdict v);  // "faster", "slower", "within noise"

struct Comparison {
  double ratio = 1;                  // median(a) / median(b)
  double ci95_lo = 1, ci95_hi = 1;   // percentile bootstrap CI of that ratio
  Verdict verdict = Verdict::within_noise;  // a vs b: faster when the whole CI is below 1
};
// Compares candidate a against b from their per-replay times (seconds).
Comparison compare(const std::vector<double>& a_s, const std::vector<double>& b_s);

}  // namespace moetune
