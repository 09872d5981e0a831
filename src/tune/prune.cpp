// Pruning before compiling (unlike compile-and-see): every rejected config is counted under one
// reason, tried in a fixed order so that counts are stable: block_k, block_n, dtype, tile_rule,
// smem, block_m_alignment, duplicate_effect, dominated_by_model.
#include "tune/prune.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <tuple>

#include "moetune/error.hpp"
#include "tune/cost_model.hpp"

namespace moetune::tune {
namespace {

// Maps one Violation to a pruning reason by the key and limit it names.
std::string reason_of(const Violation& v) {
  if (v.key == "smem_bytes") return "smem";
  if (v.limit.find("block_k") != std::string::npos) return "block_k";
  if (v.limit.find("block_n") != std::string::npos) return "block_n";
  if (v.key == "dtype") return "dtype";
  return "tile_rule";
}

// Correctness rules first, then the kernel's tiling rules, then resources.
int rank_of(const std::string& reason) {
  if (reason == "block_k") return 0;
  if (reason == "block_n") return 1;
  if (reason == "dtype") return 2;
  if (reason == "tile_rule") return 3;
  return 4;  // smem
}

}  // namespace

std::string validation_reason(const KernelConfig& c, const MoeShape& shape, const GpuSpec& gpu,
                              int M, Stage stage) {
  const ValidationTarget target{shape.dtype, shape.block_shape, &gpu};
  std::string best;
  for (const Violation& v : validate_config(c, target, M)) {
    const std::string r = reason_of(v);
    if (best.empty() || rank_of(r) < rank_of(best)) best = r;
  }
  if (!best.empty() && best != "smem") return best;
  // Shape rules of this stage: a K-tile longer than the reduction computes zeros; split-K
  // slices shorter than one K-tile leave blocks with nothing to reduce.
  const StageDims d = stage_dims(shape, stage);
  if (c.BLOCK_SIZE_K > d.K_red || double(c.SPLIT_K) * c.BLOCK_SIZE_K > d.K_red) return "tile_rule";
  return best;
}

StagePlan prune(const std::vector<KernelConfig>& space, const MoeShape& shape,
                const GpuSpec& gpu, int M, Stage stage, const KernelConfig& default_config,
                const PruneOptions& o) {
  StagePlan plan;
  plan.stage = stage;
  plan.default_config = default_config;
  plan.space = static_cast<long>(space.size());
  const std::set<KernelConfig> in_space(space.begin(), space.end());
  for (const char* r : {"block_k", "tile_rule", "smem"}) plan.pruned[r] = 0;

  std::map<KernelConfig, std::string> dropped;  // config -> the reason it was counted under
  auto drop = [&](const KernelConfig& c, const std::string& r) {
    ++plan.pruned[r];
    dropped[c] = r;
  };
  std::vector<KernelConfig> valid;
  for (const KernelConfig& c : space) {
    const std::string r = validation_reason(c, shape, gpu, M, stage);
    if (!r.empty()) {
      drop(c, r);
    } else if (o.block_m && c.BLOCK_SIZE_M != *o.block_m) {
      drop(c, "block_m_alignment");
    } else {
      valid.push_back(c);
    }
  }

  // Duplicate effect, as the model sees it: GROUP_SIZE_M orders M-tiles that share weights; with
  // one M-tile per expert it shares nothing, and every value at or beyond the M-tiles of an
  // expert acts alike. The block order still changes (a group then spans experts), which moved
  // block-fp8 GEMM2 at M = 1024 by 7% on an H200: successive halving's neighbourhood step times
  // the best's other GROUP_SIZE_M values (strategy.hpp, kNeighbourKeys).
  std::vector<KernelConfig> unique;
  if (o.exhaustive) {
    unique = valid;
  } else {
    const double max_tokens = max_tokens_per_expert(shape, M);
    std::set<KernelConfig> seen;
    for (const KernelConfig& c : valid) {
      KernelConfig effect = c;
      const int m_tiles = static_cast<int>(std::ceil(max_tokens / c.BLOCK_SIZE_M));
      effect.GROUP_SIZE_M = m_tiles <= 1 ? 1 : std::min(c.GROUP_SIZE_M, m_tiles);
      if (seen.insert(effect).second) {
        unique.push_back(c);
      } else {
        drop(c, "duplicate_effect");
      }
    }
  }

  // Rank by the model.
  std::vector<double> predicted(unique.size());
  for (std::size_t i = 0; i < unique.size(); ++i) {
    predicted[i] = predicted_time_s(shape, gpu, M, stage, unique[i]);
  }
  std::vector<std::size_t> order(unique.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return predicted[a] < predicted[b]; });

  std::size_t keep = unique.size();
  if (!o.exhaustive) {
    keep = std::max<std::size_t>(
        static_cast<std::size_t>(o.min_keep),
        static_cast<std::size_t>(std::ceil(o.keep_fraction * double(unique.size()))));
    keep = std::min(keep, unique.size());
  }
  // Besides the top share, a hedge against the model's blind spots: the best of each tile shape
  // (BLOCK_SIZE_M, BLOCK_SIZE_N, SPLIT_K, SWAP_AB) whose predicted time is within kHedge of the
  // best (the model does not tell swap-AB from the unswapped tile: both are kept).
  constexpr double kHedge = 1.3;
  std::set<std::tuple<int, int, int, int>> shapes_seen;
  const double best_predicted = order.empty() ? 0 : predicted[order.front()];
  std::set<KernelConfig> kept;
  for (std::size_t r = 0; r < order.size(); ++r) {
    const KernelConfig& c = unique[order[r]];
    const bool forced = std::find(o.always.begin(), o.always.end(), c) != o.always.end();
    const bool first_of_shape =
        shapes_seen.insert({c.BLOCK_SIZE_M, c.BLOCK_SIZE_N, c.SPLIT_K, c.SWAP_AB}).second;
    const bool hedge = !o.exhaustive && first_of_shape &&
                       predicted[order[r]] <= kHedge * best_predicted;
    if (r < keep || forced || hedge) {
      plan.candidates.push_back(c);
      plan.predicted_s.push_back(predicted[order[r]]);
      kept.insert(c);
    } else {
      drop(c, "dominated_by_model");
    }
  }
  // The default and the seeds are measured even when validation or dedup dropped them (a
  // default must be timed for the trust rule; an invalid one fails as a recorded result), and
  // even when the space lacks them (e.g. the default's GROUP_SIZE_M 8): such a config joins this
  // stage's space, so that space == candidates + sum(pruned) holds by construction.
  auto add_forced = [&](const KernelConfig& c) {
    if (kept.count(c)) return;
    if (o.block_m && c.BLOCK_SIZE_M != *o.block_m) return;
    // Counted once: as a candidate now, no longer under the reason it was dropped for.
    if (auto it = dropped.find(c); it != dropped.end()) {
      --plan.pruned[it->second];
    } else if (!in_space.count(c)) {
      ++plan.space;
    }
    plan.candidates.push_back(c);
    plan.predicted_s.push_back(predicted_time_s(shape, gpu, M, stage, c));
    kept.insert(c);
  };
  add_forced(default_config);
  for (const KernelConfig& c : o.always) add_forced(c);
  // Keep the ranking order after the additions.
  std::vector<std::size_t> idx(plan.candidates.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
    return plan.predicted_s[a] < plan.predicted_s[b];
  });
  StagePlan sorted = plan;
  for (std::size_t i = 0; i < idx.size(); ++i) {
    sorted.candidates[i] = plan.candidates[idx[i]];
    sorted.predicted_s[i] = plan.predicted_s[idx[i]];
  }
  return sorted;
}

}  // namespace moetune::tune
