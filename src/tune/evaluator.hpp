// The one door to the hardware: strategies and the tuner see only Evaluator::evaluate and
// check. Implementations: GpuEvaluator (src/tune/gpu_evaluator.hpp, a restartable worker process),
// ReplayEvaluator (a record log, CPU, deterministic) and SyntheticEvaluator (a known cost surface
// plus noise, for strategy tests).
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "moetune/config.hpp"
#include "moetune/tuner.hpp"

namespace moetune::tune {

// A failure is a result: recorded, counted, never the end of the sweep.
enum class CandidateStatus { ok, pruned, compile_failed, launch_failed, wrong_result, timeout };
std::string_view to_string(CandidateStatus s);  // "ok", "pruned", "compile_failed", ...
// Inverse of to_string; InputError("status", text, ...) otherwise.
CandidateStatus parse_candidate_status(std::string_view text);

struct CandidateResult {
  KernelConfig config;
  CandidateStatus status = CandidateStatus::ok;
  std::string reason;          // why it failed ("" when ok)
  std::vector<double> times_s; // per-replay times (seconds) of one call; empty unless ok
  double compile_s = 0;        // compile time spent on it (0 when cached)
  double measure_s = 0;        // wall time of the measurement itself
};

// Accuracy of one config: error = ||out - ref|| / ||ref|| against the fp64 reference.
struct CheckResult {
  bool ok = false;
  double rel_error = 0;
  std::string reason;
};

class Evaluator {
 public:
  virtual ~Evaluator() = default;
  // Measures each config of one GEMM stage at batch size M with `replays` per-replay times.
  // One result per config, in the same order. Must not throw for a bad candidate (that is a
  // result); throws only when the evaluator itself is unusable (GpuUnavailable, CudaError).
  virtual std::vector<CandidateResult> evaluate(int M, Stage stage,
                                                const std::vector<KernelConfig>& configs,
                                                int replays) = 0;
  // Checks a winner's results against the fp64 reference.
  virtual CheckResult check(int M, Stage stage, const KernelConfig& config) = 0;
  // The clock the budget runs on, seconds since an arbitrary origin: wall time by default;
  // replay and synthetic evaluators return the simulated time a real run would have taken.
  virtual double clock_s() const {
    using Clock = std::chrono::steady_clock;
    return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
  }
  // Identifies the device in the log header (e.g. "NVIDIA H200"); "" = unknown.
  virtual std::string device_name() const { return ""; }
};

// One Evaluator per GPU; the tuner dispatches batch sizes to them from a queue, one thread each.
class EvaluatorPool {
 public:
  EvaluatorPool() = default;
  explicit EvaluatorPool(std::vector<std::unique_ptr<Evaluator>> owned);
  // Adds an evaluator the pool does not own (it must outlive the pool's use).
  void add(Evaluator& e) { members_.push_back(&e); }
  void add(std::unique_ptr<Evaluator> e);
  std::size_t size() const { return members_.size(); }
  Evaluator& at(std::size_t i) { return *members_.at(i); }

 private:
  std::vector<std::unique_ptr<Evaluator>> owned_;
  std::vector<Evaluator*> members_;
};

// --- SyntheticEvaluator -----------------------------------------------------------------------
// A known cost surface: time(M, stage, config) from a function, times a deterministic
// multiplicative noise (log-normal, sigma `noise_rel`) per replay, seeded by (seed, M, stage,
// config, call). The simulated clock advances by compile_s per new config plus the measured
// time times replays plus overhead_s per candidate. Configs listed in `fail` return that status.
struct SyntheticOptions {
  std::function<double(int M, Stage stage, const KernelConfig& c)> time_s;
  double noise_rel = 0.02;
  double compile_s = 1.0;      // first time a config is seen
  double overhead_s = 0.05;    // per candidate evaluation (launch, graph capture)
  std::uint64_t seed = 1;
  std::map<KernelConfig, CandidateStatus> fail;   // any M, any stage
  std::vector<KernelConfig> wrong;                // measured fine, but check() fails
};
class SyntheticEvaluator : public Evaluator {
 public:
  explicit SyntheticEvaluator(SyntheticOptions o);
  std::vector<CandidateResult> evaluate(int M, Stage stage,
                                        const std::vector<KernelConfig>& configs,
                                        int replays) override;
  CheckResult check(int M, Stage stage, const KernelConfig& config) override;
  double clock_s() const override { return clock_s_; }
  std::string device_name() const override { return device_; }
  void set_device_name(std::string d) { device_ = std::move(d); }
  long evaluations() const { return evaluations_; }  // candidate evaluations so far
  long replays_measured() const { return replays_; }

 private:
  SyntheticOptions o_;
  double clock_s_ = 0;
  long evaluations_ = 0, replays_ = 0;
  std::map<std::tuple<int, int, KernelConfig>, int> calls_;
  std::map<KernelConfig, bool> compiled_;
  std::string device_;
};

// --- ReplayEvaluator --------------------------------------------------------------------------
// Answers from a record log (record_log.hpp) without a GPU, deterministically: the n-th request
// for (M, stage, config) gets the next `replays` recorded times (cycling); a config absent from
// the log is "pruned" with reason "not in log". The simulated clock adds each record's compile_s
// (once) and the replayed times, like Kernel Tuner's simulation runner.
class RecordLog;
class ReplayEvaluator : public Evaluator {
 public:
  explicit ReplayEvaluator(const RecordLog& log);
  std::vector<CandidateResult> evaluate(int M, Stage stage,
                                        const std::vector<KernelConfig>& configs,
                                        int replays) override;
  CheckResult check(int M, Stage stage, const KernelConfig& config) override;
  double clock_s() const override { return clock_s_; }
  std::string device_name() const override { return device_; }

 private:
  struct Entry {
    CandidateStatus status = CandidateStatus::ok;
    std::string reason;
    std::vector<double> times_s;
    double compile_s = 0;
    bool compiled = false;
    std::size_t cursor = 0;
    bool wrong = false;  // a check record said wrong_result
  };
  std::map<std::tuple<int, int, KernelConfig>, Entry> entries_;
  double clock_s_ = 0;
  std::string device_;
};

}  // namespace moetune::tune
