// Candidate statuses, the evaluator pool, and the two CPU evaluators (synthetic and replay).
#include "tune/evaluator.hpp"

#include <algorithm>
#include <cmath>
#include <random>

#include "moetune/error.hpp"
#include "perf/splitmix64.hpp"
#include "tune/record_log.hpp"

namespace moetune::tune {
namespace {

constexpr std::pair<CandidateStatus, std::string_view> kStatusNames[] = {
    {CandidateStatus::ok, "ok"},
    {CandidateStatus::pruned, "pruned"},
    {CandidateStatus::compile_failed, "compile_failed"},
    {CandidateStatus::launch_failed, "launch_failed"},
    {CandidateStatus::wrong_result, "wrong_result"},
    {CandidateStatus::timeout, "timeout"},
};

// SplitMix64's output function: a stable hash for seeding per-(config, call) noise.
std::uint64_t mix(std::uint64_t x) { return splitmix64_next(x); }

std::uint64_t hash_config(const KernelConfig& c) {
  std::uint64_t h = 0;
  for (int v : {c.BLOCK_SIZE_M, c.BLOCK_SIZE_N, c.BLOCK_SIZE_K, c.GROUP_SIZE_M, c.num_warps,
                c.num_stages, c.SPLIT_K}) {
    h = mix(h ^ static_cast<std::uint64_t>(v));
  }
  // Mixed in only when set: every SWAP_AB 0 config keeps the noise it had before the key.
  if (c.SWAP_AB != 0) h = mix(h ^ 0x5a5a0000ULL ^ static_cast<std::uint64_t>(c.SWAP_AB));
  return h;
}

}  // namespace

std::string_view to_string(CandidateStatus s) {
  for (const auto& [status, name] : kStatusNames) {
    if (status == s) return name;
  }
  return "?";
}

CandidateStatus parse_candidate_status(std::string_view text) {
  for (const auto& [status, name] : kStatusNames) {
    if (name == text) return status;
  }
  throw InputError("status", std::string(text),
                   "unknown candidate status; known: ok, pruned, compile_failed, launch_failed, "
                   "wrong_result, timeout");
}

EvaluatorPool::EvaluatorPool(std::vector<std::unique_ptr<Evaluator>> owned) {
  for (auto& e : owned) add(std::move(e));
}

void EvaluatorPool::add(std::unique_ptr<Evaluator> e) {
  members_.push_back(e.get());
  owned_.push_back(std::move(e));
}

// --- SyntheticEvaluator ---------------------------------------------------------------------

SyntheticEvaluator::SyntheticEvaluator(SyntheticOptions o) : o_(std::move(o)) {}

std::vector<CandidateResult> SyntheticEvaluator::evaluate(int M, Stage stage,
                                                          const std::vector<KernelConfig>& cs,
                                                          int replays) {
  std::vector<CandidateResult> out;
  for (const KernelConfig& c : cs) {
    CandidateResult r;
    r.config = c;
    ++evaluations_;
    if (!compiled_[c]) {
      compiled_[c] = true;
      r.compile_s = o_.compile_s;
      clock_s_ += o_.compile_s;
    }
    clock_s_ += o_.overhead_s;
    if (auto it = o_.fail.find(c); it != o_.fail.end()) {
      r.status = it->second;
      r.reason = "synthetic failure";
      out.push_back(r);
      continue;
    }
    const int call = calls_[{M, static_cast<int>(stage), c}]++;
    std::mt19937_64 rng(mix(o_.seed ^ mix(hash_config(c) ^ mix(std::uint64_t(M) * 2 +
                                                                  static_cast<int>(stage)) ^
                                          mix(std::uint64_t(call) + 77))));
    std::normal_distribution<double> noise(0.0, o_.noise_rel);
    const double t = o_.time_s(M, stage, c);
    for (int i = 0; i < replays; ++i) {
      const double ti = t * std::exp(noise(rng));
      r.times_s.push_back(ti);
      if (std::isfinite(ti)) clock_s_ += ti;
    }
    r.measure_s = t * replays;
    replays_ += replays;
    out.push_back(std::move(r));
  }
  return out;
}

CheckResult SyntheticEvaluator::check(int, Stage, const KernelConfig& c) {
  clock_s_ += 0.1;
  if (std::find(o_.wrong.begin(), o_.wrong.end(), c) != o_.wrong.end()) {
    return {false, 0.5, "synthetic wrong result"};
  }
  return {true, 1e-3, ""};
}

// --- ReplayEvaluator ------------------------------------------------------------------------

ReplayEvaluator::ReplayEvaluator(const RecordLog& log) {
  device_ = log.header().value(nlohmann::json::json_pointer("/device/name"), std::string());
  for (const LogRecord& r : log.records()) {
    Entry& e = entries_[{r.M, static_cast<int>(r.stage), r.config}];
    if (r.kind == "check") {
      e.wrong = r.status != CandidateStatus::ok;
      continue;
    }
    if (r.status != CandidateStatus::ok) {
      e.status = r.status;
      e.reason = r.reason;
    }
    e.times_s.insert(e.times_s.end(), r.times_s.begin(), r.times_s.end());
    e.compile_s = std::max(e.compile_s, r.compile_s);
  }
}

std::vector<CandidateResult> ReplayEvaluator::evaluate(int M, Stage stage,
                                                       const std::vector<KernelConfig>& cs,
                                                       int replays) {
  std::vector<CandidateResult> out;
  for (const KernelConfig& c : cs) {
    CandidateResult r;
    r.config = c;
    auto it = entries_.find({M, static_cast<int>(stage), c});
    if (it == entries_.end() ||
        (it->second.times_s.empty() && it->second.status == CandidateStatus::ok)) {
      r.status = CandidateStatus::pruned;
      r.reason = "not in log";
      out.push_back(r);
      continue;
    }
    Entry& e = it->second;
    if (!e.compiled) {
      e.compiled = true;
      r.compile_s = e.compile_s;
      clock_s_ += e.compile_s;
    }
    if (e.status != CandidateStatus::ok) {
      r.status = e.status;
      r.reason = e.reason;
      out.push_back(r);
      continue;
    }
    for (int i = 0; i < replays; ++i) {
      const double t = e.times_s[e.cursor++ % e.times_s.size()];
      r.times_s.push_back(t);
      clock_s_ += t;
    }
    out.push_back(std::move(r));
  }
  return out;
}

CheckResult ReplayEvaluator::check(int M, Stage stage, const KernelConfig& c) {
  auto it = entries_.find({M, static_cast<int>(stage), c});
  if (it != entries_.end() && it->second.wrong) return {false, 1.0, "recorded wrong_result"};
  return {true, 0.0, ""};
}

}  // namespace moetune::tune
