// The one-key neighbourhood of a config: the search space's other values of the keys whose
// effect the analytic model ranks worst (strategy.hpp: kNeighbourKeys). Successive halving times
// the neighbours of its best after the last round (successive_halving.cpp).
#include <algorithm>

#include "config/config_keys.hpp"
#include "tune/prune.hpp"
#include "tune/strategy.hpp"

namespace moetune::tune {

std::vector<KernelConfig> one_key_neighbours(const KernelConfig& c, const SearchSpace& space,
                                             const MoeShape& shape, const GpuSpec& gpu, int M,
                                             Stage stage) {
  std::vector<KernelConfig> out;
  for (const auto& [key, values] : space.axes) {
    const auto kind = std::find_if(kNeighbourKeys.begin(), kNeighbourKeys.end(),
                                   [&](const NeighbourKey& k) { return k.key == key; });
    if (kind == kNeighbourKeys.end()) continue;
    int KernelConfig::*m = config::member_of(key);
    if (m == nullptr) continue;
    // Ordinal keys step to the adjacent values only; a value outside the space (a default's
    // GROUP_SIZE_M 8) has no place in the order, so every value is its neighbour.
    const auto at = std::find(values.begin(), values.end(), c.*m);
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (values[i] == c.*m) continue;
      if (kind->ordinal && at != values.end()) {
        const auto pos = static_cast<std::size_t>(at - values.begin());
        if (i + 1 != pos && i != pos + 1) continue;
      }
      KernelConfig n = c;
      n.*m = values[i];
      if (validation_reason(n, shape, gpu, M, stage).empty()) out.push_back(n);
    }
  }
  return out;
}

}  // namespace moetune::tune
