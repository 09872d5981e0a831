// Timing statistics: order statistics by nth_element (no full sorts), percentile-bootstrap CIs
// from an explicit xoshiro256** stream so that every platform gets the same CI for the same input.
#include "moetune/stats.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include <fmt/format.h>

#include "moetune/error.hpp"
#include "perf/splitmix64.hpp"

namespace moetune {
namespace {

constexpr double kCiLoPct = 2.5, kCiHiPct = 97.5;  // 95% two-sided
// sqrt(pi/2): asymptotic standard error of the median relative to sigma/sqrt(n) (normal data).
constexpr double kMedianSeFactor = 1.2533141373155003;
// MAD * 1.4826 estimates sigma for normal data while ignoring outliers (a preempted replay).
constexpr double kMadToSigma = 1.4826;

void check_samples(const std::vector<double>& v, const char* field) {
  if (v.empty()) throw InputError(field, "[]", "no samples");
  for (double x : v) {
    if (!std::isfinite(x)) throw InputError(field, fmt::format("{}", x), "sample is not finite");
  }
}

// p-th percentile of [first, last) with linear interpolation between closest ranks
// (numpy's default); reorders the range.
double percentile_inplace(double* first, double* last, double p) {
  const auto n = static_cast<std::size_t>(last - first);
  const double rank = p / 100.0 * static_cast<double>(n - 1);
  const auto lo = static_cast<std::size_t>(std::floor(rank));
  const double frac = rank - static_cast<double>(lo);
  std::nth_element(first, first + lo, last);
  const double v_lo = first[lo];
  if (frac == 0 || lo + 1 >= n) return v_lo;
  const double v_hi = *std::min_element(first + lo + 1, last);  // next order statistic
  return v_lo + frac * (v_hi - v_lo);
}

double median_inplace(std::vector<double>& v) {
  return percentile_inplace(v.data(), v.data() + v.size(), 50.0);
}

// xoshiro256** seeded through splitmix64 (Blackman & Vigna): small, fast, identical everywhere.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) {
    for (auto& s : state_) s = splitmix64_next(seed);
  }
  std::uint64_t next() {
    const std::uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const std::uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }
  // Uniform index in [0, n) by multiply-shift on the top 32 bits (n < 2^32; the bias,
  // below n / 2^32, is far under the bootstrap's own noise).
  std::size_t index(std::size_t n) { return static_cast<std::size_t>(((next() >> 32) * n) >> 32); }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::uint64_t state_[4];
};

// Median of one resample (with replacement) of `from`, using `scratch` as the buffer.
double resampled_median(const std::vector<double>& from, std::vector<double>& scratch, Rng& rng) {
  scratch.resize(from.size());
  for (double& x : scratch) x = from[rng.index(from.size())];
  return median_inplace(scratch);
}

}  // namespace

double median(std::vector<double> v) {
  check_samples(v, "samples");
  return median_inplace(v);
}

double percentile(std::vector<double> v, double p) {
  check_samples(v, "samples");
  if (!(p >= 0 && p <= 100)) {
    throw InputError("percentile", fmt::format("{}", p), "must be in [0, 100]");
  }
  return percentile_inplace(v.data(), v.data() + v.size(), p);
}

Summary summarize(const std::vector<double>& samples_s) {
  check_samples(samples_s, "samples");
  Summary s;
  s.n = static_cast<int>(samples_s.size());
  std::vector<double> work = samples_s;
  s.median_s = median_inplace(work);
  s.p10_s = percentile_inplace(work.data(), work.data() + work.size(), 10);
  s.p90_s = percentile_inplace(work.data(), work.data() + work.size(), 90);

  const double n = s.n;
  s.mean_s = std::accumulate(samples_s.begin(), samples_s.end(), 0.0) / n;
  double ss = 0;
  for (double x : samples_s) ss += (x - s.mean_s) * (x - s.mean_s);
  s.stdev_s = s.n > 1 ? std::sqrt(ss / (n - 1)) : 0.0;  // sample (n-1) standard deviation
  s.rel_stdev = s.mean_s != 0 ? s.stdev_s / std::abs(s.mean_s) : 0.0;

  Rng rng(kBootstrapSeed);
  std::vector<double> medians(kBootstrapResamples);
  for (double& m : medians) m = resampled_median(samples_s, work, rng);
  s.ci95_lo_s = percentile_inplace(medians.data(), medians.data() + medians.size(), kCiLoPct);
  s.ci95_hi_s = percentile_inplace(medians.data(), medians.data() + medians.size(), kCiHiPct);
  return s;
}

std::string to_string(Verdict v) {
  switch (v) {
    case Verdict::faster: return "faster";
    case Verdict::slower: return "slower";
    case Verdict::within_noise: return "within noise";
  }
  return "?";
}

Comparison compare(const std::vector<double>& a_s, const std::vector<double>& b_s) {
  check_samples(a_s, "a");
  check_samples(b_s, "b");
  Comparison c;
  const double med_b = median(b_s);
  if (!(med_b > 0)) throw InputError("b", fmt::format("{}", med_b), "median must be positive");
  c.ratio = median(a_s) / med_b;

  // a and b are resampled independently (separate measurements); one stream, a then b per
  // round, so the CI depends only on the inputs.
  Rng rng(kBootstrapSeed);
  std::vector<double> scratch_a, scratch_b, ratios(kBootstrapResamples);
  for (double& r : ratios) {
    const double ma = resampled_median(a_s, scratch_a, rng);
    const double mb = resampled_median(b_s, scratch_b, rng);
    r = ma / mb;
  }
  c.ci95_lo = percentile_inplace(ratios.data(), ratios.data() + ratios.size(), kCiLoPct);
  c.ci95_hi = percentile_inplace(ratios.data(), ratios.data() + ratios.size(), kCiHiPct);
  if (std::min(a_s.size(), b_s.size()) < kMinVerdictSamples) {
    c.verdict = Verdict::within_noise;  // too few samples for the CI to mean 95%
  } else if (c.ci95_hi < 1) {
    c.verdict = Verdict::faster;
  } else if (c.ci95_lo > 1) {
    c.verdict = Verdict::slower;
  } else {
    c.verdict = Verdict::within_noise;
  }
  return c;
}

double median_rel_stderr(const std::vector<double>& samples_s) {
  check_samples(samples_s, "samples");
  std::vector<double> work = samples_s;
  const double med = median_inplace(work);
  for (std::size_t i = 0; i < work.size(); ++i) work[i] = std::abs(samples_s[i] - med);
  const double mad = median_inplace(work);
  const double se = kMedianSeFactor * kMadToSigma * mad / std::sqrt(double(samples_s.size()));
  return med != 0 ? se / std::abs(med) : 0.0;
}

bool is_stable(const std::vector<double>& samples_s, double rel_tol, int min_n) {
  if (static_cast<int>(samples_s.size()) < std::max(min_n, 1)) return false;
  return median_rel_stderr(samples_s) < rel_tol;
}

std::vector<double> drop_throttled(const std::vector<double>& times_s,
                                   const std::vector<double>& clocks_MHz, double default_MHz) {
  if (times_s.size() != clocks_MHz.size()) {
    throw InputError("clocks_MHz", std::to_string(clocks_MHz.size()),
                     fmt::format("need one clock per sample ({} samples)", times_s.size()));
  }
  if (!(default_MHz > 0)) {
    throw InputError("default_MHz", fmt::format("{}", default_MHz), "must be positive");
  }
  std::vector<double> kept;
  kept.reserve(times_s.size());
  for (std::size_t i = 0; i < times_s.size(); ++i) {
    if (!is_throttled(clocks_MHz[i], default_MHz)) kept.push_back(times_s[i]);
  }
  return kept;
}

}  // namespace moetune
