// Exhaustive: the yardstick for the tuner's own quality. Every candidate that passes validation
// is timed; precision goes where the answer is decided:
//   round 1 (screen): every config, first_replays replays (as successive halving's round 1);
//   round 2 (refine): every ok config whose round-1 median is within kExhaustiveRefineWithin of
//   the round-1 best, and the default, again with exhaustive_replays(opts) replays (times
//   appended).
// A config more than 10% slower than the best after 8 replays (each sample a CUDA-graph replay
// of R calls; their spread is well under 1% on an H200) cannot be the best nor within the 3%
// quality bar of it, so giving it 32 replays more only spent GPU time: on two H200s the old
// single round of 32 replays for every config ran 18 minutes on three batch sizes of the default
// model without finishing (GEMM2 at M=64 and 1024 not reached), mostly timing the slowest
// configs (the median candidate at M=1024 runs 2.4x the best). Stops only for the budget,
// between chunks: the sweep's deadline, or this stage's share of a --budget.
#include <algorithm>
#include <cmath>
#include <limits>

#include "moetune/stats.hpp"
#include "tune/strategy.hpp"

namespace moetune::tune {

int exhaustive_replays(const TuneOptions& o) { return std::max(2, o.max_replays / 2); }

int exhaustive_screen_replays(const TuneOptions& o) {
  return std::max(2, std::min(o.first_replays, exhaustive_replays(o)));
}

namespace {

// Measures `configs` in chunks into `m` (times of a config measured before are appended; a
// failure sticks); false when the budget stopped it part way.
bool measure_all(const StageSearch& s, MeasureDoor& door, const std::vector<KernelConfig>& configs,
                 int replays, Measured& m) {
  for (std::size_t i = 0; i < configs.size(); i += kChunk) {
    // As successive halving: the first chunk (it holds the default) runs unless the sweep is
    // out of time; the rest stop at this stage's share of a --budget.
    if (door.budget_stops(s.M, s.stage, m.results.empty() && i == 0)) return false;
    const std::vector<KernelConfig> chunk(
        configs.begin() + static_cast<long>(i),
        configs.begin() + static_cast<long>(std::min(configs.size(), i + kChunk)));
    for (CandidateResult& r : door.measure(s.M, s.stage, chunk, replays)) {
      auto [it, inserted] = m.results.try_emplace(r.config, r);
      if (inserted) continue;
      CandidateResult& acc = it->second;
      if (acc.status != CandidateStatus::ok) continue;
      if (r.status != CandidateStatus::ok) {
        acc.status = r.status;
        acc.reason = r.reason;
        acc.times_s.clear();
        continue;
      }
      acc.times_s.insert(acc.times_s.end(), r.times_s.begin(), r.times_s.end());
      acc.compile_s += r.compile_s;
      acc.measure_s += r.measure_s;
    }
  }
  return true;
}

}  // namespace

std::vector<KernelConfig> exhaustive_refine_set(const Measured& screened,
                                                const KernelConfig& default_config) {
  double best = std::numeric_limits<double>::infinity();
  std::map<KernelConfig, double> med;
  for (const auto& [c, r] : screened.results) {
    if (r.status != CandidateStatus::ok || r.times_s.empty()) continue;
    const double v = median(r.times_s);  // as ranking() ranks (the upper one for even n was not)
    if (!std::isfinite(v)) continue;
    med[c] = v;
    best = std::min(best, v);
  }
  std::vector<KernelConfig> out;
  if (med.count(default_config)) out.push_back(default_config);
  for (const KernelConfig& c : screened.ranking()) {
    if (c == default_config || !med.count(c)) continue;
    if (med.at(c) <= kExhaustiveRefineWithin * best) out.push_back(c);
  }
  return out;
}

Measured exhaustive(const StageSearch& s, MeasureDoor& door) {
  Measured m;
  std::vector<KernelConfig> all{s.default_config};
  for (const KernelConfig& c : s.candidates) {
    if (!(c == s.default_config)) all.push_back(c);
  }
  const bool screened = measure_all(s, door, all, exhaustive_screen_replays(*s.opts), m);
  m.rounds = 1;
  if (!screened) {
    m.stopped_by_budget = true;
    return m;
  }
  if (exhaustive_replays(*s.opts) > exhaustive_screen_replays(*s.opts)) {
    const std::vector<KernelConfig> refine = exhaustive_refine_set(m, s.default_config);
    m.stopped_by_budget = !measure_all(s, door, refine, exhaustive_replays(*s.opts), m);
    m.rounds = 2;
  }
  return m;
}

}  // namespace moetune::tune
