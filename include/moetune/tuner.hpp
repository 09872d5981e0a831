// The tuner: search space, pruning before any compile, a plan (`tune --dry-run`), and the sweep
// itself behind an Evaluator (src/tune/evaluator.hpp), writing config tables, sidecars, a JSON
// Lines record log and a report. CPU only: the GPU enters through an Evaluator.
#pragma once
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "moetune/config.hpp"
#include "moetune/gpu_spec.hpp"
#include "moetune/model.hpp"
#include "moetune/roofline.hpp"
#include "moetune/stats.hpp"

namespace moetune::tune {

// The two grouped GEMMs of a layer: up = GEMM1 with w13 (N_out = 2N, reduction K),
// down = GEMM2 with w2 (N_out = K, reduction N). Spelled "up" / "down" as in src/gemm.
enum class Stage { up, down };
std::string_view to_string(Stage s);

// Where the numbers come from; every field goes into the record log header and the sidecars.
// The CLI fills what it knows (kernel_source_hash from moetune_cuda, driver/CUDA/NVRTC from the
// device); empty fields are written as empty strings.
struct Provenance {
  std::string device_name;         // as CUDA reports it (defaults to the GpuSpec's name)
  std::string driver_version;
  std::string cuda_version;
  std::string nvrtc_version;
  std::string moetune_version;
  std::string kernel_source_hash;  // keys the log, the sidecar and the overwrite check
  std::string git_revision;
  std::vector<std::string> argv;
};

struct TuneOptions {
  MoeShape shape;
  GpuSpec gpu;                      // the target (spec-table entry)
  std::vector<int> batch;           // batch sizes M to tune; empty = default_batch_sizes()
  double budget_s = 0;              // wall-time cap for the sweep; 0 = none
  int gpus = 1;                     // evaluators used in parallel (one per GPU)
  std::filesystem::path out_dir = ".";
  Naming naming = Naming::sglang;
  bool exhaustive = false;          // time every valid config (the tuner's quality check;
                                    // strategies/exhaustive.cpp: screen, then refine the near-best)
  bool resume = false;              // reuse the measured records of the log in out_dir
  bool force = false;               // overwrite tables whose sidecar records another K/kernel
  bool dry_run = false;             // plan only (the CLI calls plan() and prints to_json)
  std::uint64_t seed = 0;
  bool write_report = true;         // Markdown + HTML report beside the tables
  // What `shapes --json` prints for this shape; the CLI sets it, plan's JSON embeds it as-is.
  // When null, moetune::shape_json(shape, provenance.device_name or gpu.name) is used.
  nlohmann::json shape_json;
  Provenance provenance;
  // Raised (by the CLI's SIGINT/SIGTERM handler) to end the sweep early: no evaluator call starts
  // after it is seen, the batch size in flight is abandoned (its records stay in the log) and the
  // outputs are written for the Ms that finished. nullptr = never.
  const std::atomic<bool>* stop = nullptr;
  // What moetune's own layer (FusedMoe with its default options, on `gpu`) runs at M with an up
  // and a down config: "stages" (a kernel per stage: the configs' tiles), or a path with tiles
  // of its own ("decode", "sliced": FusedMoe::layer_kernels), where the table's entry configures
  // only the stage path (`bench --no-decode-kernels` / `--no-sliced`). The CLI sets it (it links
  // the layer); unset, the plan, sidecars and report say nothing about it. An InputError from
  // it leaves that M's answer unknown ("").
  std::function<std::string(int M, const KernelConfig& up, const KernelConfig& down)>
      layer_kernels;

  // Search knobs (defaults are the shipped behaviour; tests may tighten them).
  double keep_fraction = 0.08;      // share of the model-ranked valid configs kept per stage
  int min_keep = 24;                // never keep fewer (unless fewer are valid)
  int first_replays = 8;            // replays per candidate in the first halving round
  int max_replays = 64;             // replays of the finalists
  double halving_keep = 1.0 / 3.0;  // share kept per halving round
  int neighbour_seeds = 3;          // winners of the nearest tuned Ms added to each M's list
  // Rounds of successive halving's neighbourhood step (the best's one-key neighbours timed after
  // the last round, again from a new best; 0 = none): what the analytic model cannot rank.
  int neighbourhood_rounds = 4;
};

// --- command-line helpers (InputError naming the field on junk) -----------------------------
// "90s", "5m", "1h30m", "2h", "1.5m", "300" (seconds) -> seconds. Field "budget".
double parse_budget(std::string_view text);
// "1,2,4,64" -> {1,2,4,64}: positive ints up to kMaxBatch, sorted, duplicates removed, spaces
// around items allowed. Field "batch". Every command's --batch.
// 16,777,216 tokens: M * topk < 2^31 for every topk up to 127; check_token_slots checks a
// model's own topk.
inline constexpr int kMaxBatch = 1 << 24;
std::vector<int> parse_batch_list(std::string_view text);
// The kernels' token-slot ids are int32: every M with M * topk >= 2^31 is refused (field
// "batch"). kMaxBatch covers it up to topk 128; a model's own topk is checked here.
void check_token_slots(long long M, int topk);
template <class Batch>
void check_token_slots(const Batch& batch, int topk) {
  for (const auto M : batch) check_token_slots(static_cast<long long>(M), topk);
}
// "8=46.7,64=111.45" -> {8: 46.7, 64: 111.45}: layer times in µs per M measured elsewhere
// (roofline --measured). M as in parse_batch_list, each once; times positive and finite.
// Field "measured".
std::map<int, double> parse_measured_times(std::string_view text);
// "concurrency=1..64,spec=3" -> concurrencies lo, the powers of two inside (lo, hi), and hi,
// each times spec+1 tokens per step -> {4,8,16,32,64,128,256}. "concurrency=8" is one value;
// spec defaults to 0. Field "serving" (or "serving.<key>" for a bad value).
std::vector<int> serving_batch_sizes(std::string_view text);

// --- search space ---------------------------------------------------------------------------
// Values of each key, JSON spelling; the classic 1,920 times moetune's own keys.
struct SearchSpace {
  std::vector<std::pair<std::string, std::vector<int>>> axes;
  std::size_t size() const;             // product of the axes (per GEMM)
  std::vector<KernelConfig> configs() const;  // every combination, in axis order
  nlohmann::json to_json() const;       // {"BLOCK_SIZE_M": [16, ...], ...}
};
// BLOCK_SIZE_M {16..256} x BLOCK_SIZE_N {32..256} x BLOCK_SIZE_K {64,128,256} x GROUP_SIZE_M
// {1,16,32,64} x num_warps {4,8} x num_stages {2..5} x SPLIT_K {1,2,4,8} x SWAP_AB {0,1}:
// 15,360 per GEMM.
const SearchSpace& default_space();

// --- pruning and the plan -------------------------------------------------------------------
// Pruning reasons, in the order they are tried (one reason per config):
//   "block_k", "block_n", "dtype",    validate_config, by rule (block_k/block_n: fp8 scale
//   "tile_rule", "smem"               blocks; tile_rule: the kernel's tiling rules plus shape
//                                     rules, e.g. SPLIT_K slices shorter than one K-tile)
//   "block_m_alignment"               down only: BLOCK_SIZE_M differs from the up choice
//   "duplicate_effect"                same kernel behaviour as a kept config (e.g. GROUP_SIZE_M
//                                     when every expert has one M-tile)
//   "dominated_by_model"              outside the top share by predicted time
struct StagePlan {
  Stage stage = Stage::up;
  // Configs considered: the search space, plus a forced config (the default, a warm-start seed)
  // that is outside it. Always == candidates.size() + the sum of pruned.
  long space = 0;
  std::vector<KernelConfig> candidates;  // ranked by predicted time, fastest first
  std::vector<double> predicted_s;       // same order
  std::map<std::string, long> pruned;    // reason -> count
  KernelConfig default_config;           // always among the candidates
};
struct PlanRow {
  int M = 0;
  long space = 0;       // up.space + down.space: the space of both GEMMs (+ forced outsiders)
  long candidates = 0;  // left to measure after pruning, both GEMMs
  std::map<std::string, long> pruned;
  double estimated_s = 0;
  StagePlan up, down;
  std::string layer_kernels;  // with the default configs (TuneOptions::layer_kernels; "" unset)
};
struct TunePlan {
  nlohmann::json shape;
  std::vector<int> batch;
  std::vector<PlanRow> rows;
  double estimated_seconds = 0;  // capped at --budget
  double needed_seconds = 0;     // the whole sweep, uncapped (> estimated: the budget cuts it)
};
// Prunes one stage at M. `up_block_m` restricts down's BLOCK_SIZE_M (one alignment).
StagePlan plan_stage(const TuneOptions& opts, int M, Stage stage,
                     std::optional<int> up_block_m = std::nullopt);
// The whole plan (down restricted to the model's best up BLOCK_SIZE_M at each M).
TunePlan plan(const TuneOptions& opts);
// DESIGN.md's `tune --dry-run --json`: {"shape", "batch", "plan": [{"M", "space", "candidates",
// "pruned"}], "estimated_seconds"}; each plan row also has "layer_kernels" where it is known.
nlohmann::json to_json(const TunePlan& p);

// --- the sweep ------------------------------------------------------------------------------
// One stage's outcome at one M.
struct StageOutcome {
  KernelConfig default_config;
  KernelConfig chosen;                 // what the table holds
  std::optional<KernelConfig> winner;  // the fastest measured (accuracy-checked) config
  std::optional<KernelConfig> runner_up;
  std::vector<double> default_times_s, winner_times_s, chosen_times_s;
  Summary default_summary, winner_summary, chosen_summary;
  std::optional<Comparison> winner_vs_default;   // verdict decides the trust rule
  std::optional<Comparison> winner_vs_runner_up; // the margin (ratio < 1: winner faster)
  int measured = 0;                    // candidates measured (ok or failed)
  // Successive halving's neighbourhood step (strategy.hpp): neighbours timed, and the rounds
  // whose best neighbour beat the leader on equal replays; rounds 0 when it did not run.
  int neighbourhood_rounds = 0, neighbours_timed = 0, neighbourhood_moves = 0;
  std::map<std::string, int> failures; // status -> count (compile_failed, wrong_result, ...)
  std::vector<std::string> notes;      // e.g. "winner m64n128k128... failed check; next taken"
};

// Per-M flag: "tuned", "within noise" (best not significantly faster, default kept),
// "kept default" (the default measured best, the best slower on confirmation, failed checks, or
// the default failed so nothing could be judged), "not reached" (budget),
// kInterruptedFlag (the stop flag came first). The last two keep the default.
inline constexpr const char* kInterruptedFlag = "not tuned (interrupted)";
struct MResult {
  int M = 0;
  std::string flag = "not reached";
  bool reached = false;
  StageOutcome up, down;
  // Both GEMMs (replay-wise sums of the stages' per-replay times).
  std::vector<double> default_total_s, tuned_total_s;
  Summary default_total, tuned_total;
  std::optional<Comparison> tuned_vs_default;
  RooflineRow floor;
  double margin_ratio = 1;  // winner / runner-up median ratio of the total (<= 1)
  // What moetune's layer runs at M with the chosen pair and with the default pair
  // (TuneOptions::layer_kernels; "" unset). They differ where the tuned up entry's BLOCK_SIZE_M
  // turns the sliced kernel off or on (it runs only where that is 16): the row then says so in a
  // note.
  std::string layer_kernels, default_layer_kernels;
};
// Whether the tuned pair moves moetune's layer onto other kernels than the default pair's (both
// known and different).
inline bool layer_path_moved(const MResult& r) {
  return !r.layer_kernels.empty() && !r.default_layer_kernels.empty() &&
         r.layer_kernels != r.default_layer_kernels;
}

struct TuneResult {
  std::vector<MResult> rows;  // in batch order
  ConfigTable up, down;
  std::filesystem::path up_table, down_table, up_sidecar, down_sidecar, log_path;
  std::filesystem::path report_md, report_html;
  double elapsed_s = 0;
  long measurements = 0;       // candidate evaluations sent to evaluators (not resumed ones)
  long resumed = 0;            // results taken from the log
  bool budget_exhausted = false;
  bool interrupted = false;    // the stop flag ended the sweep before every M finished
  // When interrupted: the command line that continues the run, provenance.argv plus --resume,
  // quoted for a POSIX shell ("moetune tune --out DIR --resume" when argv is unknown).
  std::string resume_command;
  std::string strategy;        // "successive_halving" or "exhaustive"
};

class Evaluator;      // src/tune/evaluator.hpp
class EvaluatorPool;  // src/tune/evaluator.hpp

// Progress callbacks (the CLI draws a bar on a TTY, plain lines otherwise). Called from the
// sweep's threads, one call at a time (the tuner serializes them). Default: do nothing.
class ProgressSink {
 public:
  virtual ~ProgressSink() = default;
  // Starting batch size M, the index-th of total (0-based), on worker `worker` (one per GPU).
  virtual void started_M(int M, int index, int total, int worker) {
    (void)M, (void)index, (void)total, (void)worker;
  }
  // A candidate finished (measured, failed or resumed): done of about planned evaluations for
  // this stage at this M (the plan's estimate of every halving round and the neighbourhood;
  // never below done).
  virtual void candidate_done(int M, Stage stage, const KernelConfig& config,
                              const std::string& status, int done, int planned) {
    (void)M, (void)stage, (void)config, (void)status, (void)done, (void)planned;
  }
  // Elapsed wall time and the estimate of what is left (seconds), after each round.
  virtual void eta(double elapsed_s, double remaining_s) { (void)elapsed_s, (void)remaining_s; }
  virtual void finished_M(const MResult& row) { (void)row; }
};
using NullProgress = ProgressSink;

// Runs the sweep; writes tables, sidecars, the log (and the report when write_report).
// Throws InputError("out", ...) before measuring when a table in out_dir has a sidecar with
// another K or kernel hash and !force; InputError("resume.<field>", ...) on a foreign log.
TuneResult run_tune(const TuneOptions& opts, Evaluator& evaluator, ProgressSink& progress);
// One thread per evaluator (one per GPU); batch sizes dispatched from a queue.
TuneResult run_tune(const TuneOptions& opts, EvaluatorPool& pool, ProgressSink& progress);

// The file names in out_dir for these options.
std::filesystem::path up_table_path(const TuneOptions& opts);
std::filesystem::path down_table_path(const TuneOptions& opts);
std::filesystem::path log_path(const TuneOptions& opts);

}  // namespace moetune::tune
