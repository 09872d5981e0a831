// Successive halving with noise-aware stopping.
//
// Round 1 measures every candidate (the default first) with first_replays replays; each next
// round keeps the best share by median (never fewer than two, always the default, so the trust
// rule compares like with like) and measures it again with twice the replays, accumulating
// times. It stops when the best's 95% CI of the ratio to the runner-up excludes 1 (compare()),
// when the replays pass max_replays, or when the budget (the sweep's, or this stage's share)
// runs out -- between chunks of kChunk configs, so a budget stop keeps all that was measured.
// Then the neighbourhood of the best (time_neighbourhood): what the model could not rank.
#include <algorithm>
#include <cmath>

#include "moetune/stats.hpp"
#include "tune/strategy.hpp"

namespace moetune::tune {
namespace {

void merge(Measured& m, const CandidateResult& r) {
  auto [it, inserted] = m.results.try_emplace(r.config, r);
  if (inserted) return;
  CandidateResult& acc = it->second;
  if (acc.status != CandidateStatus::ok) return;  // failures stick
  if (r.status != CandidateStatus::ok) {
    acc.status = r.status;
    acc.reason = r.reason;
    return;
  }
  acc.times_s.insert(acc.times_s.end(), r.times_s.begin(), r.times_s.end());
  acc.compile_s += r.compile_s;
  acc.measure_s += r.measure_s;
}

// Measures `alive` in chunks; false when the budget stopped it part way.
bool measure_round(const StageSearch& s, MeasureDoor& door, const std::vector<KernelConfig>& alive,
                   int replays, Measured& m) {
  for (std::size_t i = 0; i < alive.size(); i += kChunk) {
    // The first chunk of the first round always runs unless the sweep itself is out of time:
    // it holds the default, without which no M can be judged.
    const bool must = m.rounds == 0 && i == 0;
    if (must ? door.out_of_time() : door.stage_out_of_time()) return false;
    const std::vector<KernelConfig> chunk(
        alive.begin() + static_cast<long>(i),
        alive.begin() + static_cast<long>(std::min(alive.size(), i + kChunk)));
    for (const CandidateResult& r : door.measure(s.M, s.stage, chunk, replays)) merge(m, r);
  }
  return true;
}

// The best's one-key neighbours not yet timed, first_replays each; again from a new best, until
// the best stays or after opts.neighbourhood_rounds rounds. A neighbour measured with fewer replays than the
// finalists can only take the lead by a median under theirs; decide() confirms a winner against
// the default with fresh replays either way.
void time_neighbourhood(const StageSearch& s, MeasureDoor& door, Measured& m) {
  const TuneOptions& o = *s.opts;
  for (int round = 0; round < o.neighbourhood_rounds; ++round) {
    const std::vector<KernelConfig> ranked = m.ranking();
    if (ranked.empty()) return;
    std::vector<KernelConfig> fresh;
    for (const KernelConfig& n :
         one_key_neighbours(ranked.front(), default_space(), o.shape, o.gpu, s.M, s.stage)) {
      if (!m.results.count(n)) fresh.push_back(n);
    }
    if (fresh.empty()) return;
    if (!measure_round(s, door, fresh, std::max(2, o.first_replays), m)) {
      m.stopped_by_budget = true;
      return;
    }
    ++m.neighbourhood_rounds;
    m.neighbours_timed += static_cast<int>(fresh.size());
    if (m.ranking().front() == ranked.front()) return;
  }
}

}  // namespace

Measured successive_halving(const StageSearch& s, MeasureDoor& door) {
  const TuneOptions& o = *s.opts;
  Measured m;
  std::vector<KernelConfig> alive{s.default_config};
  for (const KernelConfig& c : s.candidates) {
    if (!(c == s.default_config)) alive.push_back(c);
  }
  int replays = std::max(2, o.first_replays);
  for (;;) {
    const bool complete = measure_round(s, door, alive, replays, m);
    ++m.rounds;
    if (!complete) {
      m.stopped_by_budget = true;
      break;
    }
    const std::vector<KernelConfig> ranked = m.ranking();
    if (ranked.size() <= 1) break;
    const Comparison c = compare(m.results.at(ranked[0]).times_s, m.results.at(ranked[1]).times_s);
    if (c.verdict == Verdict::faster) {
      m.separated = true;
      break;
    }
    if (2 * replays > o.max_replays) break;
    // Survivors: the best share (at least two), plus the default.
    const std::size_t keep = std::max<std::size_t>(
        2, static_cast<std::size_t>(std::ceil(double(ranked.size()) * o.halving_keep)));
    std::vector<KernelConfig> next(
        ranked.begin(), ranked.begin() + static_cast<long>(std::min(keep, ranked.size())));
    const bool has_default = std::find(next.begin(), next.end(), s.default_config) != next.end();
    if (!has_default && m.results.count(s.default_config) &&
        m.results.at(s.default_config).status == CandidateStatus::ok) {
      next.insert(next.begin(), s.default_config);
    }
    alive = std::move(next);
    replays *= 2;
  }
  if (!m.stopped_by_budget) time_neighbourhood(s, door, m);
  return m;
}

}  // namespace moetune::tune
