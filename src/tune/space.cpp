// The search space: the classic 1,920 configs times moetune's own keys (SPLIT_K {1,2,4,8}: every
// split the kernel and validate_config accept, and moetune's default uses 8 at decode; SWAP_AB
// {0,1}: validation keeps 1 only on sm_90a with 128-byte rows and BLOCK_SIZE_M 16/32), per GEMM.
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "config/config_keys.hpp"
#include "moetune/tuner.hpp"

namespace moetune::tune {

std::string_view to_string(Stage s) { return s == Stage::up ? "up" : "down"; }

std::size_t SearchSpace::size() const {
  std::size_t n = 1;
  for (const auto& [key, values] : axes) n *= values.size();
  return n;
}

namespace {
int KernelConfig::*member_of(const std::string& key) {
  if (int KernelConfig::*m = config::member_of(key)) return m;
  throw std::logic_error("search space axis without a KernelConfig member: " + key);
}
}  // namespace

std::vector<KernelConfig> SearchSpace::configs() const {
  std::vector<int KernelConfig::*> members;
  for (const auto& [key, values] : axes) members.push_back(member_of(key));
  std::vector<KernelConfig> out;
  out.reserve(size());
  std::vector<std::size_t> index(axes.size(), 0);
  if (size() == 0) return out;
  for (;;) {
    KernelConfig c;
    for (std::size_t a = 0; a < axes.size(); ++a) c.*members[a] = axes[a].second[index[a]];
    out.push_back(c);
    // Odometer: the last axis turns fastest.
    std::size_t a = axes.size();
    while (a > 0) {
      --a;
      if (++index[a] < axes[a].second.size()) break;
      index[a] = 0;
      if (a == 0) return out;
    }
    if (axes.empty()) return out;
  }
}

nlohmann::json SearchSpace::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [key, values] : axes) j[key] = values;
  return j;
}

const SearchSpace& default_space() {
  static const SearchSpace space{{
      {"BLOCK_SIZE_M", {16, 32, 64, 128, 256}},
      {"BLOCK_SIZE_N", {32, 64, 128, 256}},
      {"BLOCK_SIZE_K", {64, 128, 256}},
      {"GROUP_SIZE_M", {1, 16, 32, 64}},
      {"num_warps", {4, 8}},
      {"num_stages", {2, 3, 4, 5}},
      {"SPLIT_K", {1, 2, 4, 8}},
      {"SWAP_AB", {0, 1}},
  }};
  return space;
}

}  // namespace moetune::tune
