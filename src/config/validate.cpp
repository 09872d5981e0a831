// Validation before any compile: each config against moetune's kernel and the target GPU.
// Every violation is collected (config validate reports them all), none stops the others.
#include <algorithm>
#include <climits>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "config/config_keys.hpp"
#include "config/kernel_rules.hpp"
#include "kernels/common/tile_math.cuh"
#include "moetune/config.hpp"

namespace moetune {
namespace {

// The values moetune's kernel is instantiated for, per key (a range when `values` is empty).
struct AllowedValues {
  int KernelConfig::*member;
  const char* key;
  std::vector<int> values;  // allowed set, or empty for the range [min, max]
  int min = 1, max = INT_MAX;
  const char* rule;
};

const std::vector<AllowedValues>& allowed_values() {
  static const std::vector<AllowedValues> kAllowed = {
      {.member = &KernelConfig::BLOCK_SIZE_M,
       .key = "BLOCK_SIZE_M",
       .values = {16, 32, 64, 128, 256},
       .rule = "tile rows: a power of two from one MMA (16) to 256"},
      {.member = &KernelConfig::BLOCK_SIZE_N,
       .key = "BLOCK_SIZE_N",
       .values = {32, 64, 128, 256},
       .rule = "tile columns: a power of two from 32 to 256"},
      {.member = &KernelConfig::BLOCK_SIZE_K,
       .key = "BLOCK_SIZE_K",
       .values = {32, 64, 128, 256},
       .rule = "tile depth: a power of two from 32 to 256"},
      {.member = &KernelConfig::GROUP_SIZE_M,
       .key = "GROUP_SIZE_M",
       .min = 1,
       .rule = "a launch group holds at least one M-tile"},
      {.member = &KernelConfig::num_warps,
       .key = "num_warps",
       .values = {4, 8},
       .rule = "moetune's kernel runs 4 or 8 warps per block"},
      // 1 stage would leave no load in flight behind the MMAs: the kernel is a cp.async ring.
      {.member = &KernelConfig::num_stages,
       .key = "num_stages",
       .min = 2,
       .max = 5,
       .rule = "the cp.async pipeline has 2 to 5 stages"},
      {.member = &KernelConfig::SPLIT_K,
       .key = "SPLIT_K",
       .values = {1, 2, 4, 8},
       .rule = "the reduction splits 1, 2, 4 or 8 ways"},
      {.member = &KernelConfig::SWAP_AB,
       .key = "SWAP_AB",
       .values = {0, 1},
       .rule = "0: tokens as the MMA's A operand; 1: weights as A (swap-AB)"},
  };
  return kAllowed;
}

void check_allowed_values(const KernelConfig& c, int M, std::vector<Violation>& out) {
  for (const auto& allowed : allowed_values()) {
    const int value = c.*allowed.member;
    const auto& set = allowed.values;
    const bool ok = set.empty() ? value >= allowed.min && value <= allowed.max
                                : std::find(set.begin(), set.end(), value) != set.end();
    if (ok) continue;
    const std::string limit = !set.empty() ? fmt::format("{{{}}}", fmt::join(set, ", "))
                              : allowed.max == INT_MAX
                                  ? fmt::format(">= {}", allowed.min)
                                  : fmt::format("{}..{}", allowed.min, allowed.max);
    out.push_back({M, allowed.key, std::to_string(value), limit, allowed.rule});
  }
}

// moetune's GEMM kernel's own tiling rules (warp grid, accumulator registers, row width), from
// tile_math.cuh where the kernel static_asserts them. Asked only of configs whose keys are all
// in the allowed sets, so that one bad value is not reported twice. The violation's key is the
// first config key the rule names.
void check_kernel_rules(const KernelConfig& c, const ValidationTarget& t, int M,
                        std::vector<Violation>& out) {
  const char* reason = config::kernel_rule_violation(c, t);
  if (reason == nullptr) return;
  const std::string rule = reason;
  std::string key = "tile", value = fmt::format("{}x{}x{}, {} warps", c.BLOCK_SIZE_M,
                                                c.BLOCK_SIZE_N, c.BLOCK_SIZE_K, c.num_warps);
  size_t first = std::string::npos;
  for (const auto& field : config::kConfigFields) {
    const size_t at = rule.find(field.key);
    if (at < first) {
      first = at;
      key = field.key;
      value = std::to_string(c.*field.member);
    }
  }
  out.push_back({M, key, value, "moetune's GEMM kernel", rule});
}

void check_threads(const KernelConfig& c, int M, std::vector<Violation>& out) {
  constexpr long long kMaxThreadsPerBlock = 1024;  // every CUDA GPU since sm_20
  const long long threads = 32LL * c.num_warps;
  if (threads > kMaxThreadsPerBlock) {
    out.push_back({M, "num_warps", std::to_string(c.num_warps),
                   fmt::format("{} ({} threads)", kMaxThreadsPerBlock / 32, kMaxThreadsPerBlock),
                   fmt::format("{} threads per block exceed the CUDA limit", threads)});
  }
}

void check_smem(const KernelConfig& c, const ValidationTarget& t, int M,
                std::vector<Violation>& out) {
  const int smem_bytes = moetune_smem_bytes(c, t);
  if (smem_bytes > t.gpu->smem_per_block_bytes) {
    out.push_back({M, "smem_bytes", std::to_string(smem_bytes),
                   std::to_string(t.gpu->smem_per_block_bytes),
                   fmt::format("shared memory per block exceeds {}'s limit (the reference "
                               "kernel's estimate: {} B)",
                               t.gpu->name, reference_smem_bytes(c, t))});
  }
}

// fp8 block-wise: each weight scale covers [block_n, block_k]; a tile must not mix two scales
// along K (silently wrong results in the field) and must align with them along N.
void check_block_shape(const KernelConfig& c, const ValidationTarget& t, int M,
                       std::vector<Violation>& out) {
  if (t.dtype != Dtype::fp8_w8a8 || !t.block_shape) return;
  const auto [block_n, block_k] = *t.block_shape;
  if (c.BLOCK_SIZE_K > 0 && block_k % c.BLOCK_SIZE_K != 0) {
    out.push_back({M, "BLOCK_SIZE_K", std::to_string(c.BLOCK_SIZE_K),
                   fmt::format("a divisor of block_k {}", block_k),
                   "a K-tile must not straddle two fp8 scale groups"});
  }
  if (c.BLOCK_SIZE_N > 0 && block_n > 0 && block_n % c.BLOCK_SIZE_N != 0 &&
      c.BLOCK_SIZE_N % block_n != 0) {
    out.push_back({M, "BLOCK_SIZE_N", std::to_string(c.BLOCK_SIZE_N),
                   fmt::format("a divisor or multiple of block_n {}", block_n),
                   "an N-tile must lie inside one fp8 scale block or cover whole ones"});
  }
}

void check_arch(const ValidationTarget& t, int M, std::vector<Violation>& out) {
  const int needed = min_compute_capability(t.dtype);
  if (t.gpu->compute_capability() < needed) {
    out.push_back({M, "dtype", std::string(to_string(t.dtype)), fmt::format("sm_{}", needed),
                   fmt::format("{} is sm_{}; its tensor cores cannot run {}", t.gpu->name,
                               t.gpu->compute_capability(), to_string(t.dtype))});
  }
}

void check_unknown_keys(const std::vector<std::string>& unknown_keys, int M,
                        std::vector<Violation>& out) {
  std::vector<std::string> known;
  for (const auto& field : config::kConfigFields) known.emplace_back(field.key);
  const std::string limit = fmt::format("one of {}", fmt::join(known, ", "));
  for (const auto& key : unknown_keys) out.push_back({M, key, "(present)", limit, "unknown key"});
}

// Formulas take int; a config far outside the allowed sets could overflow them. Such a config
// needs more than any GPU has, so the byte count saturates at INT_MAX instead.
bool fits_int(double bytes) { return bytes < static_cast<double>(INT_MAX) / 2; }

}  // namespace

int moetune_smem_bytes(const KernelConfig& c, const ValidationTarget& t) {
  const int bytes = weight_bytes(t.dtype);  // w8a8: activations are as wide as weights
  const bool block_scales = t.dtype == Dtype::fp8_w8a8 && t.block_shape.has_value();
  // Above the formula for any num_stages (+1) and slot table (x2): a safe overflow guard.
  const double bound =
      (static_cast<double>(c.num_stages) + 1) *
      ((static_cast<double>(c.BLOCK_SIZE_M) + c.BLOCK_SIZE_N) * c.BLOCK_SIZE_K * bytes +
       8.0 * c.BLOCK_SIZE_M + 16);
  if (!fits_int(bound)) return INT_MAX;
  return tile_math::gemm_smem_bytes(c.BLOCK_SIZE_M, c.BLOCK_SIZE_N, c.BLOCK_SIZE_K, c.num_stages,
                                    bytes, bytes, block_scales);
}

int reference_smem_bytes(const KernelConfig& c, const ValidationTarget& t) {
  const int bytes = weight_bytes(t.dtype);
  const double bound = static_cast<double>(c.num_stages) *
                       (static_cast<double>(c.BLOCK_SIZE_M) + c.BLOCK_SIZE_N) * c.BLOCK_SIZE_K *
                       bytes;
  if (!fits_int(bound)) return INT_MAX;
  return tile_math::reference_smem_bytes(c.BLOCK_SIZE_M, c.BLOCK_SIZE_N, c.BLOCK_SIZE_K,
                                         c.num_stages, bytes);
}

std::vector<Violation> validate_config(const KernelConfig& c, const ValidationTarget& t, int M,
                                       const std::vector<std::string>& unknown_keys) {
  // A missing GPU is a caller's bug, not bad input: every caller resolves --gpu first.
  if (t.gpu == nullptr) throw std::invalid_argument("validate_config: ValidationTarget.gpu unset");
  std::vector<Violation> out;
  check_allowed_values(c, M, out);
  if (out.empty()) check_kernel_rules(c, t, M, out);
  check_threads(c, M, out);
  check_smem(c, t, M, out);  // moetune's formula decides; the reference is only reported
  check_block_shape(c, t, M, out);
  check_arch(t, M, out);
  check_unknown_keys(unknown_keys, M, out);
  return out;
}

std::vector<Violation> validate_table(const ParsedTable& up, const ValidationTarget& t,
                                      const ParsedTable* down) {
  std::vector<Violation> out;
  for (const auto& [M, entry] : up.entries) {
    auto found = validate_config(entry.config, t, M, entry.unknown_keys);
    out.insert(out.end(), found.begin(), found.end());
  }
  if (down == nullptr) return out;
  for (const auto& [M, entry] : down->entries) {
    auto found = validate_config(entry.config, t, M, entry.unknown_keys);
    for (auto& v : found) v.down = true;
    out.insert(out.end(), found.begin(), found.end());
  }
  // One alignment (padding to BLOCK_SIZE_M) feeds both GEMMs.
  for (const auto& [M, entry] : down->entries) {
    const auto up_entry = up.entries.find(M);
    if (up_entry == up.entries.end()) continue;
    const int up_bm = up_entry->second.config.BLOCK_SIZE_M;
    if (entry.config.BLOCK_SIZE_M != up_bm) {
      out.push_back({M, "BLOCK_SIZE_M", std::to_string(entry.config.BLOCK_SIZE_M),
                     fmt::format("{} (the up table's)", up_bm), "up and down share one alignment",
                     true});
    }
  }
  return out;
}

}  // namespace moetune
