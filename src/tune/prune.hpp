// Pruning before any compile: validation by rule, the one-alignment rule for down, configs whose
// effect duplicates a kept one, and the analytic model's top share. Prints nothing; counts.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "moetune/config.hpp"
#include "moetune/tuner.hpp"

namespace moetune::tune {

// The reason validation rejects c for this stage and shape ("block_k", "tile_rule", "smem"),
// or "" when it is valid. Config-level rules come from validate_config; shape rules are
// added here: BLOCK_SIZE_K longer than the reduction, SPLIT_K slices shorter than one K-tile.
std::string validation_reason(const KernelConfig& c, const MoeShape& shape, const GpuSpec& gpu,
                              int M, Stage stage);

struct PruneOptions {
  bool exhaustive = false;          // validation (and alignment) only
  double keep_fraction = 0.08;
  int min_keep = 24;
  std::optional<int> block_m;       // require this BLOCK_SIZE_M (down: the up choice)
  std::vector<KernelConfig> always; // kept whatever the model says (default, warm-start seeds)
};

// Prunes `space` for one stage at M. Candidates come back ranked by predicted time. The default
// and o.always are candidates whatever validation, dedup or the model say (down: only those with
// o.block_m); one outside `space` is added to the plan's space, so that
// plan.space == candidates.size() + sum(pruned) always.
StagePlan prune(const std::vector<KernelConfig>& space, const MoeShape& shape,
                const GpuSpec& gpu, int M, Stage stage, const KernelConfig& default_config,
                const PruneOptions& o);

}  // namespace moetune::tune
