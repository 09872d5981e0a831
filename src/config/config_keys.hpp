// The config keys in their JSON spelling, each bound to its KernelConfig member: one table
// that the JSON reader, writer and validator walk, so that a new key is added in one place.
#pragma once
#include <array>
#include <string_view>

#include "moetune/config.hpp"

namespace moetune::config {

struct ConfigField {
  const char* key;            // JSON spelling, e.g. "BLOCK_SIZE_M"
  int KernelConfig::*member;  // where it lives in KernelConfig
  bool required;              // classic keys are required; moetune's own have defaults
  int min = 1;                // smallest value the reader takes (validation narrows further)
};

// Classic keys first, in the order servers write them, then moetune's own.
inline constexpr std::array<ConfigField, 8> kConfigFields = {{
    {"BLOCK_SIZE_M", &KernelConfig::BLOCK_SIZE_M, true},
    {"BLOCK_SIZE_N", &KernelConfig::BLOCK_SIZE_N, true},
    {"BLOCK_SIZE_K", &KernelConfig::BLOCK_SIZE_K, true},
    {"GROUP_SIZE_M", &KernelConfig::GROUP_SIZE_M, true},
    {"num_warps", &KernelConfig::num_warps, true},
    {"num_stages", &KernelConfig::num_stages, true},
    {"SPLIT_K", &KernelConfig::SPLIT_K, false},
    {"SWAP_AB", &KernelConfig::SWAP_AB, false, 0},
}};

// The member a key names ("GROUP_SIZE_M" -> &KernelConfig::GROUP_SIZE_M); nullptr for no key.
constexpr int KernelConfig::*member_of(std::string_view key) {
  for (const auto& f : kConfigFields) {
    if (key == f.key) return f.member;
  }
  return nullptr;
}

}  // namespace moetune::config
