// Nearest-M lookup, the rule servers apply to a table: the key nearest to M by absolute
// difference, a tie to the smaller key.
#include <cstdlib>
#include <iterator>

#include "moetune/config.hpp"
#include "moetune/error.hpp"

namespace moetune {

int nearest_key(const std::map<int, KernelConfig>& table, int M) {
  if (table.empty()) throw InputError("config", "{}", "empty table");
  // The first key >= M and the one before it are the only candidates.
  const auto above = table.lower_bound(M);
  if (above == table.begin()) return above->first;
  const auto below = std::prev(above);
  if (above == table.end()) return below->first;
  // 64-bit: M and keys span the whole int range, their difference may not.
  const long long to_below = static_cast<long long>(M) - below->first;
  const long long to_above = static_cast<long long>(above->first) - M;
  return to_above < to_below ? above->first : below->first;
}

const KernelConfig& lookup(const ConfigTable& table, int M) {
  return table.at(nearest_key(table, M));
}

const KernelConfig& lookup_down(const ConfigTable& up, const ConfigTable& down, int M) {
  return down.empty() ? lookup(up, M) : lookup(down, M);
}

}  // namespace moetune
