// Successive halving with noise-aware stopping.
//
// Round 1 measures every candidate (the default first) with first_replays replays; each next
// round keeps the best share of that round's configs by median (never fewer than two, always
// the default, so the trust rule compares like with like) and measures it again with twice the
// replays, accumulating times. It stops when the best's 95% CI of the ratio to the runner-up
// excludes 1 (compare()), when the replays pass max_replays, or when the budget (the sweep's,
// or this stage's share) runs out -- between chunks of kChunk configs, so a budget stop keeps
// all that was measured.
// Then the neighbourhood of the best (time_neighbourhood): what the model could not rank.
#include <algorithm>
#include <cmath>
#include <map>

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

// Measures `alive` in chunks; false when the budget stopped it part way. `round_times` (if
// given) receives this round's own samples per ok config.
bool measure_round(const StageSearch& s, MeasureDoor& door, const std::vector<KernelConfig>& alive,
                   int replays, Measured& m,
                   std::map<KernelConfig, std::vector<double>>* round_times = nullptr) {
  for (std::size_t i = 0; i < alive.size(); i += kChunk) {
    // The first chunk of the first round always runs unless the sweep itself is out of time:
    // it holds the default, without which no M can be judged.
    const bool must = m.rounds == 0 && i == 0;
    if (door.budget_stops(s.M, s.stage, must)) return false;
    const std::vector<KernelConfig> chunk(
        alive.begin() + static_cast<long>(i),
        alive.begin() + static_cast<long>(std::min(alive.size(), i + kChunk)));
    for (const CandidateResult& r : door.measure(s.M, s.stage, chunk, replays)) {
      if (round_times && r.status == CandidateStatus::ok && !r.times_s.empty())
        (*round_times)[r.config] = r.times_s;
      merge(m, r);
    }
  }
  return true;
}

// The leader's one-key neighbours not yet timed, and the leader again, first_replays each in
// one round; the fastest neighbour of the round takes the lead only when compare() says it is
// faster than the leader on this round's samples (equal replays, same minutes: a neighbour's
// few samples against the finalists' many would move the lead on noise alone) and again on a
// fresh pair of the two. Again from a new leader, at most opts.neighbourhood_rounds rounds.
// The leader stays first in m.ranking().
void time_neighbourhood(const StageSearch& s, MeasureDoor& door, Measured& m) {
  const TuneOptions& o = *s.opts;
  const std::vector<KernelConfig> ranked = m.ranking();
  if (ranked.empty() || o.neighbourhood_rounds <= 0) return;
  KernelConfig leader = ranked.front();
  m.leader = leader;
  for (int round = 0; round < o.neighbourhood_rounds; ++round) {
    std::vector<KernelConfig> batch{leader};
    for (const KernelConfig& n :
         one_key_neighbours(leader, default_space(), o.shape, o.gpu, s.M, s.stage)) {
      if (!m.results.count(n)) batch.push_back(n);
    }
    if (batch.size() == 1) return;
    std::map<KernelConfig, std::vector<double>> times;
    const bool complete =
        measure_round(s, door, batch, std::max(2, o.first_replays), m, &times);
    ++m.neighbourhood_rounds;
    for (std::size_t i = 1; i < batch.size(); ++i) m.neighbours_timed += m.results.count(batch[i]);
    if (!complete) {
      m.stopped_by_budget = true;
      return;
    }
    if (!times.count(leader)) return;
    const KernelConfig* best = nullptr;
    for (std::size_t i = 1; i < batch.size(); ++i) {
      auto it = times.find(batch[i]);
      if (it != times.end() && (!best || median(it->second) < median(times.at(*best))))
        best = &batch[i];
    }
    if (!best || compare(times.at(*best), times.at(leader)).verdict != Verdict::faster) return;
    // The fastest of up to 8 neighbours, judged on the samples that picked it, beats an equal
    // leader 5-8% of the time, not 2.5% (best-of-K): a fresh pair must say faster again.
    const KernelConfig challenger = *best;
    std::map<KernelConfig, std::vector<double>> again;
    if (!measure_round(s, door, {challenger, leader}, std::max(2, o.first_replays), m, &again)) {
      m.stopped_by_budget = true;
      return;
    }
    if (!again.count(challenger) || !again.count(leader) ||
        compare(again.at(challenger), again.at(leader)).verdict != Verdict::faster)
      return;
    leader = challenger;
    m.leader = leader;
    ++m.neighbourhood_moves;
    m.separated = false;  // the halving's separation was of the old leader
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
    // Only this round's configs compete: those cut earlier keep their few samples, and a lucky
    // median among them must neither stop the search nor hold a place (ranking over every
    // config measured kept a third of all of them each round: 45 configs timed at 16, 32 and
    // 64 replays at M = 4096, the two-GPU sweep's critical path).
    const std::vector<KernelConfig> ranked = m.by_median(&alive);
    m.finalists = ranked;
    if (ranked.size() <= 1) break;
    const Comparison c = compare(m.results.at(ranked[0]).times_s, m.results.at(ranked[1]).times_s);
    if (c.verdict == Verdict::faster) {
      m.separated = true;
      break;
    }
    if (2 * replays > o.max_replays) break;
    // Survivors: the best share of this round (at least two), plus the default.
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
