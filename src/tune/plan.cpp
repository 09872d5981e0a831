// The plan of a sweep (`tune --dry-run`): per M, the space of both GEMMs, the candidates left
// after pruning, the pruned counts by reason, and the estimated time from the cost model.
#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "moetune/error.hpp"
#include "moetune/tuner.hpp"
#include "tune/cost_model.hpp"
#include "tune/prune.hpp"
#include "tune/strategy.hpp"

namespace moetune::tune {

namespace {

std::string device_of(const TuneOptions& o) {
  return o.provenance.device_name.empty() ? o.gpu.name : o.provenance.device_name;
}

std::vector<int> batch_of(const TuneOptions& o) {
  std::vector<int> b = o.batch.empty() ? default_batch_sizes() : o.batch;
  for (int M : b) {
    if (M < 1) throw InputError("batch", std::to_string(M), "batch sizes must be positive");
  }
  return b;
}

}  // namespace

std::vector<int> tune_batch_sizes(const TuneOptions& o) { return batch_of(o); }

std::string layer_kernels_of(const TuneOptions& o, int M, const KernelConfig& up,
                             const KernelConfig& down) {
  if (!o.layer_kernels) return "";
  try {
    return o.layer_kernels(M, up, down);
  } catch (const InputError&) {
    return "";
  }
}

KernelConfig default_config(const TuneOptions& o, int M, Stage stage) {
  KernelConfig up = moetune_default_config(o.shape, o.gpu, M, false);
  if (stage == Stage::up) return up;
  KernelConfig down = moetune_default_config(o.shape, o.gpu, M, true);
  down.BLOCK_SIZE_M = up.BLOCK_SIZE_M;  // one alignment serves both GEMMs
  return down;
}

KernelConfig down_baseline_for(const TuneOptions& o, int M, int block_m) {
  KernelConfig c = default_config(o, M, Stage::down);
  c.BLOCK_SIZE_M = block_m;
  if (c.SWAP_AB == 1 && !validation_reason(c, o.shape, o.gpu, M, Stage::down).empty()) {
    c.SWAP_AB = 0;
    c.GROUP_SIZE_M = 1;  // the decode tiles' order: the swap-AB rule's GROUP_SIZE_M 32 goes too
  }
  return c;
}

StagePlan plan_stage(const TuneOptions& opts, int M, Stage stage, std::optional<int> up_block_m,
                     const std::vector<KernelConfig>& seeds) {
  PruneOptions po;
  po.exhaustive = opts.exhaustive;
  po.keep_fraction = opts.keep_fraction;
  po.min_keep = opts.min_keep;
  po.block_m = stage == Stage::down ? up_block_m : std::nullopt;
  po.always = seeds;
  const KernelConfig def = po.block_m ? down_baseline_for(opts, M, *po.block_m)
                                      : default_config(opts, M, stage);
  return prune(default_space().configs(), opts.shape, opts.gpu, M, stage, def, po);
}

StagePlan plan_stage(const TuneOptions& opts, int M, Stage stage, std::optional<int> up_block_m) {
  return plan_stage(opts, M, stage, up_block_m, {});
}

double estimate_stage_s(const StagePlan& p, const TuneOptions& o,
                        std::set<std::pair<int, KernelConfig>>* compiled) {
  const double n = double(p.candidates.size());
  if (n == 0) return 0;
  double mean_pred = 0;
  for (double t : p.predicted_s) mean_pred += t;
  mean_pred /= n;
  // A kernel compiles once per sweep (the JIT cache): count only configs new to `compiled`.
  double new_kernels = n;
  if (compiled != nullptr) {
    new_kernels = 0;
    for (const KernelConfig& c : p.candidates)
      new_kernels += compiled->insert({static_cast<int>(p.stage), c}).second ? 1 : 0;
  }
  double total = new_kernels * kCompileSPerConfig / kCompileThreads + kCheckSPerWinner;
  if (o.exhaustive) {
    // The screen times every config; the refine round re-times the default and those within
    // 10% of the best, at about the best's time: 27-71 of 3,456 GEMM1 configs (1-2%) and 62 of
    // 400 GEMM2 configs (15%) in the H200 run of bench/results/2026-11-30_h200_tune_quality.md.
    constexpr double kRefineShareGuess = 0.05;
    total += n * measurement_s(mean_pred, exhaustive_screen_replays(o));
    return total + (1 + std::ceil(kRefineShareGuess * n)) *
                       measurement_s(p.predicted_s.front(), exhaustive_replays(o));
  }
  // Round 1 always runs; the later ones only where the best did not separate: 2 to 5 of the 36
  // stages of the default sweep on an H200 (bench/results/2026-11-30_h200_fifth_session/, the
  // record logs of four sweeps), so they count at that share.
  constexpr double kPastRoundOneShare = 0.15;
  bool first = true;
  for (const HalvingRound& r : halving_rounds(o, p.candidates.size())) {
    total += (first ? 1.0 : kPastRoundOneShare) * double(r.configs) *
             measurement_s(mean_pred, r.replays);
    first = false;
  }
  total += double(neighbourhood_guess(o)) * (kCompileSPerConfig / kCompileThreads +
                                             measurement_s(p.predicted_s.front(), o.first_replays));
  return total;
}

std::vector<HalvingRound> halving_rounds(const TuneOptions& o, std::size_t n) {
  // Each round keeps a share of its own configs and doubles the replays of the survivors; the
  // default joins them when cut (not counted: it is mostly among the fastest).
  std::vector<HalvingRound> rounds;
  double alive = double(n);
  for (int replays = std::max(2, o.first_replays); alive >= 2 && replays <= o.max_replays;
       replays *= 2) {
    rounds.push_back({static_cast<long>(alive), replays});
    alive = std::max(2.0, std::ceil(alive * o.halving_keep));
  }
  if (rounds.empty() && n > 0)
    rounds.push_back({static_cast<long>(n), std::max(2, o.first_replays)});
  return rounds;
}

int neighbourhood_guess(const TuneOptions& o) {
  // Up to 8 one-key neighbours and the leader a round. 9 a stage: the default sweep on an H200
  // measured 306 more measurements with the step than without (8.5 a stage).
  return o.neighbourhood_rounds > 0 ? 9 : 0;
}

long expected_evaluations(const TuneOptions& o, std::size_t n) {
  if (n == 0) return 0;
  if (o.exhaustive)
    return static_cast<long>(n) + 1 + static_cast<long>(std::ceil(0.05 * double(n)));
  const std::vector<HalvingRound> rounds = halving_rounds(o, n);
  long total = static_cast<long>(rounds.size()) - 1;  // the default rejoining each later round
  for (const HalvingRound& r : rounds) total += r.configs;
  return total + neighbourhood_guess(o) + 2;  // + decide()'s fresh winner and default
}

TunePlan plan(const TuneOptions& opts) {
  TunePlan p;
  p.shape = opts.shape_json.is_null() ? nlohmann::json(shape_json(opts.shape, device_of(opts)))
                                      : opts.shape_json;
  p.batch = batch_of(opts);
  std::set<std::pair<int, KernelConfig>> compiled;  // (stage, config) kernels counted so far
  for (int M : p.batch) {
    PlanRow row;
    row.M = M;
    row.up = plan_stage(opts, M, Stage::up, std::nullopt);
    // Down follows the up choice's BLOCK_SIZE_M; before measuring, the model's best up config.
    const int block_m = row.up.candidates.empty() ? row.up.default_config.BLOCK_SIZE_M
                                                  : row.up.candidates.front().BLOCK_SIZE_M;
    row.down = plan_stage(opts, M, Stage::down, block_m);
    // Both GEMMs' spaces: 2 x default_space().size(), plus any forced config (default,
    // warm-start seed) outside it, which prune() counts in its stage's space.
    row.space = row.up.space + row.down.space;
    row.candidates = long(row.up.candidates.size() + row.down.candidates.size());
    for (const StagePlan* s : {&row.up, &row.down}) {
      for (const auto& [reason, count] : s->pruned) row.pruned[reason] += count;
    }
    row.estimated_s =
        estimate_stage_s(row.up, opts, &compiled) + estimate_stage_s(row.down, opts, &compiled);
    row.layer_kernels = layer_kernels_of(opts, M, default_config(opts, M, Stage::up),
                                         default_config(opts, M, Stage::down));
    p.rows.push_back(std::move(row));
  }
  // Batch sizes run in parallel on the GPUs, each taken in order by the first GPU free (as the
  // tuner's workers take them from its queue): the sweep ends with the busiest GPU, never before
  // its longest batch size.
  std::vector<double> busy(static_cast<std::size_t>(std::max(1, opts.gpus)), 0.0);
  for (const PlanRow& r : p.rows) *std::min_element(busy.begin(), busy.end()) += r.estimated_s;
  p.estimated_seconds = *std::max_element(busy.begin(), busy.end());
  p.needed_seconds = p.estimated_seconds;
  if (opts.budget_s > 0) p.estimated_seconds = std::min(p.estimated_seconds, opts.budget_s);
  return p;
}

nlohmann::json to_json(const TunePlan& p) {
  nlohmann::json rows = nlohmann::json::array();
  for (const PlanRow& r : p.rows) {
    nlohmann::json pruned = nlohmann::json::object();
    for (const auto& [reason, count] : r.pruned) pruned[reason] = count;
    nlohmann::json row{{"M", r.M}, {"space", r.space}, {"candidates", r.candidates},
                       {"pruned", pruned}};
    if (!r.layer_kernels.empty()) row["layer_kernels"] = r.layer_kernels;
    rows.push_back(std::move(row));
  }
  return {{"shape", p.shape},
          {"batch", p.batch},
          {"plan", rows},
          {"estimated_seconds", std::round(p.estimated_seconds * 10) / 10}};
}

std::filesystem::path up_table_path(const TuneOptions& o) {
  return o.out_dir / config_file_name(o.shape, device_of(o), o.naming, false);
}
std::filesystem::path down_table_path(const TuneOptions& o) {
  return o.out_dir / config_file_name(o.shape, device_of(o), o.naming, true);
}
std::filesystem::path log_path(const TuneOptions& o) {
  std::string name = config_file_name(o.shape, device_of(o), o.naming, false);
  name.resize(name.size() - 5);  // ".json"
  return o.out_dir / (name + ".tune.jsonl");
}

}  // namespace moetune::tune
