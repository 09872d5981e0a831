// What strategies see: a MeasureDoor (the one door to an Evaluator: resume cache, record log,
// budget, progress) and one entry point per strategy (strategies/<name>.cpp).
#pragma once
#include <array>
#include <atomic>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "moetune/tuner.hpp"
#include "tune/evaluator.hpp"
#include "tune/record_log.hpp"

namespace moetune::tune {

// Wall-time budget on an evaluator's clock: a hard deadline for the sweep and a soft one for the
// stage being tuned (its fair share of what is left).
struct Budget {
  double deadline_s = std::numeric_limits<double>::infinity();
  double stage_deadline_s = std::numeric_limits<double>::infinity();
};

// Serializes progress callbacks from several worker threads.
class SerialProgress {
 public:
  explicit SerialProgress(ProgressSink& sink) : sink_(sink) {}
  template <class F>
  void call(F&& f) {
    std::lock_guard<std::mutex> lock(mutex_);
    f(sink_);
  }

 private:
  ProgressSink& sink_;
  std::mutex mutex_;
};

// Thrown by MeasureDoor when the stop flag (TuneOptions::stop) is up: the batch size being tuned
// is abandoned (run_tune catches it per M). Carries the door's counts so that none is lost.
struct Interrupted {
  long measurements = 0, resumed = 0;
};

class MeasureDoor {
 public:
  MeasureDoor(Evaluator& ev, LogWriter* log, ResumeCache* resume, SerialProgress* progress,
              Budget budget, const std::atomic<bool>* stop = nullptr)
      : ev_(ev), log_(log), resume_(resume), progress_(progress), budget_(budget), stop_(stop) {}
  // Measures each config with `replays` more replays: from the resume cache when recorded, else
  // by the evaluator (logged). Results come back in order; times are those of this call only.
  // Once *stop is up, measure() and check() throw Interrupted instead of calling the evaluator
  // (what the resume cache holds is still served).
  std::vector<CandidateResult> measure(int M, Stage stage, const std::vector<KernelConfig>& cs,
                                       int replays);
  CheckResult check(int M, Stage stage, const KernelConfig& c);
  bool out_of_time() const;        // the sweep's deadline has passed
  bool stage_out_of_time() const;  // this stage's share has passed (or the sweep's)
  // A strategy's check before its next chunk of (M, stage): whether the budget stops it here,
  // the sweep's deadline only (sweep_only) or this stage's share too. A resumed log decides
  // while it is replayed: it stops where the recorded run's budget stopped it (its "stop"
  // record), never before its records run out; a new stop is logged. Replayed records cost no
  // time, so the clock alone would let a resumed run search further than the first did.
  bool budget_stops(int M, Stage stage, bool sweep_only);
  double now_s() const { return ev_.clock_s(); }
  Budget& budget() { return budget_; }
  long measurements() const { return measurements_; }
  long resumed() const { return resumed_; }
  void set_planned(int planned) { planned_ = planned, done_ = 0; }
  void throw_if_stopped() const {
    if (stop_ && stop_->load()) throw Interrupted{measurements_, resumed_};
  }

 private:
  Evaluator& ev_;
  LogWriter* log_;
  ResumeCache* resume_;
  SerialProgress* progress_;
  Budget budget_;
  const std::atomic<bool>* stop_;
  long measurements_ = 0, resumed_ = 0;
  int planned_ = 0, done_ = 0;
  std::map<std::pair<int, int>, long> served_;  // (M, stage) -> results returned so far
};

// One stage at one M: ranked candidates (the default among them) and the knobs.
struct StageSearch {
  int M = 0;
  Stage stage = Stage::up;
  std::vector<KernelConfig> candidates;  // ranked by the model, fastest first
  KernelConfig default_config;
  const TuneOptions* opts = nullptr;
};

// Accumulated results per config over all rounds (times appended; a failure sticks).
struct Measured {
  std::map<KernelConfig, CandidateResult> results;
  int rounds = 0;
  bool stopped_by_budget = false;
  bool separated = false;  // the best's CI separated from the runner-up's
  int neighbourhood_rounds = 0;  // successive halving's neighbourhood rounds that timed configs
  int neighbours_timed = 0;      // neighbours those rounds timed (the leader's re-times not counted)
  int neighbourhood_moves = 0;   // rounds whose best neighbour beat the leader (compare(): faster)
  // Set by the neighbourhood step: the config it ended on, first in ranking() whatever the
  // medians say (a neighbour that did not beat it on equal replays may show a lower median).
  std::optional<KernelConfig> leader;
  // Successive halving's last round: the configs timed most. They rank before
  // the configs cut in earlier rounds, whose few samples may show a lower median by luck.
  std::vector<KernelConfig> finalists;
  // Ok configs (of `among` when given, else all) by median time, fastest first.
  std::vector<KernelConfig> by_median(const std::vector<KernelConfig>* among = nullptr) const;
  // by_median(), the finalists (when set) before the rest; the leader (when set and ok) first.
  std::vector<KernelConfig> ranking() const;
};

// strategies/successive_halving.cpp: measure all briefly, keep the best share (and the
// default), double the replays, stop when the best separates from the runner-up (compare()),
// replays reach max_replays, or the budget says so. Then the neighbourhood: the best's
// one_key_neighbours not yet timed and the best again, first_replays each; a neighbour takes the
// lead (Measured::leader) only when compare() finds it faster on those equal replays and on a
// fresh pair of the two; again
// from a new leader (at most opts.neighbourhood_rounds rounds; the budget stops it between
// chunks).
Measured successive_halving(const StageSearch& s, MeasureDoor& door);

// The keys a neighbourhood step changes, one at a time: those the analytic model ranks least
// well. GROUP_SIZE_M only reorders blocks where an expert has one M-tile, which the model (and
// prune's duplicate_effect) takes as no effect, yet it moved block-fp8 GEMM2 at M = 1024 by 7%
// (m64n64k128 s3: g1 116.8 us, g16 109.4; bench/results/2026-11-30_h200_fourth_session_call1.md);
// stages, warps and split-K trade latency hiding against occupancy in ways it only estimates;
// swap-AB changes the MMA, which the model does not see at all.
// Ordinal keys step to adjacent values of the space; the others take every other value.
struct NeighbourKey {
  std::string_view key;
  bool ordinal;
};
inline constexpr std::array<NeighbourKey, 5> kNeighbourKeys = {{{"GROUP_SIZE_M", false},
                                                                 {"num_stages", true},
                                                                 {"num_warps", false},
                                                                 {"SPLIT_K", true},
                                                                 {"SWAP_AB", false}}};
// strategies/neighbourhood.cpp: c with one of kNeighbourKeys changed to another value of
// `space`, kept when validation_reason passes it for (shape, gpu, M, stage). Tile sizes never
// change, so a down config keeps the alignment's BLOCK_SIZE_M.
std::vector<KernelConfig> one_key_neighbours(const KernelConfig& c, const SearchSpace& space,
                                             const MoeShape& shape, const GpuSpec& gpu, int M,
                                             Stage stage);
// strategies/exhaustive.cpp: every candidate timed with exhaustive_screen_replays(opts)
// replays; then the default and every config within kExhaustiveRefineWithin of the screen's
// best again with exhaustive_replays(opts) (times appended).
Measured exhaustive(const StageSearch& s, MeasureDoor& door);
int exhaustive_replays(const TuneOptions& o);         // max(2, max_replays / 2)
int exhaustive_screen_replays(const TuneOptions& o);  // first_replays, at most the above
inline constexpr double kExhaustiveRefineWithin = 1.10;
// The configs the refine round re-times: the default (when it ran), then every ok config of
// `screened` whose median is at most kExhaustiveRefineWithin x the best median, fastest first.
std::vector<KernelConfig> exhaustive_refine_set(const Measured& screened,
                                                const KernelConfig& default_config);

// plan.cpp internals shared with the tuner.
std::vector<int> tune_batch_sizes(const TuneOptions& o);
// moetune's default; for down, with the up default's BLOCK_SIZE_M (one alignment).
KernelConfig default_config(const TuneOptions& o, int M, Stage stage);
// The down default moved to the up choice's BLOCK_SIZE_M: the baseline down is judged against.
// A swap-AB default (BLOCK_SIZE_M 16/32 only) that the new BLOCK_SIZE_M rules out falls back to
// the same tile unswapped (without that, an up winner of 64 rows made down's baseline a config
// that fails, and the row fell back to both defaults).
KernelConfig down_baseline_for(const TuneOptions& o, int M, int block_m);
// o.layer_kernels(M, up, down), or "" when it is unset or says InputError (a pair the layer
// refuses: the answer is unknown, and a sweep's outputs are written regardless).
std::string layer_kernels_of(const TuneOptions& o, int M, const KernelConfig& up,
                             const KernelConfig& down);
StagePlan plan_stage(const TuneOptions& opts, int M, Stage stage, std::optional<int> up_block_m,
                     const std::vector<KernelConfig>& seeds);
// Seconds to tune one stage at one M: compiles (of the configs not yet in `compiled`, which it
// extends; nullptr counts them all), measurements per cost_model's measurement_s, the check.
double estimate_stage_s(const StagePlan& p, const TuneOptions& o,
                        std::set<std::pair<int, KernelConfig>>* compiled = nullptr);

// Successive halving's rounds on n candidates as planned: configs timed and replays each (the
// search may stop sooner, when the best separates).
struct HalvingRound {
  long configs = 0;
  int replays = 0;
};
std::vector<HalvingRound> halving_rounds(const TuneOptions& o, std::size_t n);
// The neighbourhood step's measurements a stage, as the plan guesses them.
int neighbourhood_guess(const TuneOptions& o);
// Candidate evaluations of one stage with n candidates as planned (every halving round run, the
// default rejoining each, the neighbourhood's guess, decide()'s fresh pair; exhaustive: screen
// and refine): the progress bar's "of about". Halving stops sooner when the best separates; the
// neighbourhood may take more rounds than guessed.
long expected_evaluations(const TuneOptions& o, std::size_t n);

// Configs per evaluate() call: the budget is checked between chunks.
inline constexpr int kChunk = 8;

}  // namespace moetune::tune
