// Exhaustive: every candidate that passes validation, one round of exhaustive_replays(opts)
// replays each (the yardstick for the tuner's own quality). Stops only for the budget.
#include <algorithm>

#include "tune/strategy.hpp"

namespace moetune::tune {

int exhaustive_replays(const TuneOptions& o) { return std::max(2, o.max_replays / 2); }

Measured exhaustive(const StageSearch& s, MeasureDoor& door) {
  Measured m;
  std::vector<KernelConfig> all{s.default_config};
  for (const KernelConfig& c : s.candidates) {
    if (!(c == s.default_config)) all.push_back(c);
  }
  const int replays = exhaustive_replays(*s.opts);
  for (std::size_t i = 0; i < all.size(); i += kChunk) {
    if (door.out_of_time()) {
      m.stopped_by_budget = true;
      break;
    }
    const std::vector<KernelConfig> chunk(
        all.begin() + static_cast<long>(i),
        all.begin() + static_cast<long>(std::min(all.size(), i + kChunk)));
    for (CandidateResult& r : door.measure(s.M, s.stage, chunk, replays)) {
      m.results.emplace(r.config, std::move(r));
    }
  }
  m.rounds = 1;
  return m;
}

}  // namespace moetune::tune
