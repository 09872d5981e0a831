// The one door to an Evaluator (Kernel Tuner's CostFunc): resumed results first, the rest
// measured and logged one record each, the budget consulted, progress reported.
#include <algorithm>
#include <cmath>

#include "tune/strategy.hpp"

namespace moetune::tune {

std::vector<CandidateResult> MeasureDoor::measure(int M, Stage stage,
                                                  const std::vector<KernelConfig>& cs,
                                                  int replays) {
  std::vector<std::optional<CandidateResult>> out(cs.size());
  std::vector<KernelConfig> fresh;
  std::vector<std::size_t> fresh_at;
  for (std::size_t i = 0; i < cs.size(); ++i) {
    if (resume_) {
      if (std::optional<CandidateResult> r = resume_->take(M, stage, cs[i])) {
        // A resumed ok record of another replay count is still a valid sample; use it as is.
        out[i] = std::move(r);
        ++resumed_;
        continue;
      }
    }
    fresh.push_back(cs[i]);
    fresh_at.push_back(i);
  }
  if (!fresh.empty()) {
    throw_if_stopped();  // after the resume cache: a stopped run still replays its log
    std::vector<CandidateResult> got = ev_.evaluate(M, stage, fresh, replays);
    got.resize(fresh.size());  // an evaluator answering short: the rest never ran
    for (std::size_t j = 0; j < fresh.size(); ++j) {
      CandidateResult& r = got[j];
      if (!(r.config == fresh[j])) {
        r = CandidateResult{
            fresh[j], CandidateStatus::launch_failed, "no result from evaluator", {}, 0, 0};
      }
      if (r.status == CandidateStatus::ok && r.times_s.empty()) {
        r.status = CandidateStatus::launch_failed;
        r.reason = "no times";
      }
      // A time that is not a positive finite number is a broken measurement, not a sample.
      if (r.status == CandidateStatus::ok &&
          std::any_of(r.times_s.begin(), r.times_s.end(),
                      [](double t) { return !std::isfinite(t) || t <= 0; })) {
        r.status = CandidateStatus::launch_failed;
        r.reason = "non-finite or non-positive time";
        r.times_s.clear();
      }
      ++measurements_;
      if (log_) {
        LogRecord rec;
        rec.M = M;
        rec.stage = stage;
        rec.config = r.config;
        rec.status = r.status;
        rec.reason = r.reason;
        rec.times_s = r.times_s;
        rec.compile_s = r.compile_s;
        log_->write(rec);
      }
      out[fresh_at[j]] = std::move(r);
    }
  }
  std::vector<CandidateResult> results;
  results.reserve(cs.size());
  served_[{M, static_cast<int>(stage)}] += static_cast<long>(out.size());
  for (auto& r : out) {
    results.push_back(std::move(*r));
    ++done_;
    if (progress_) {
      const CandidateResult& last = results.back();
      progress_->call([&](ProgressSink& p) {
        p.candidate_done(M, stage, last.config, std::string(to_string(last.status)), done_,
                         std::max(planned_, done_));
      });
    }
  }
  return results;
}

CheckResult MeasureDoor::check(int M, Stage stage, const KernelConfig& c) {
  if (resume_) {
    if (std::optional<CheckResult> r = resume_->check(M, stage, c)) return *r;
  }
  throw_if_stopped();
  CheckResult r = ev_.check(M, stage, c);
  if (log_) {
    LogRecord rec;
    rec.kind = "check";
    rec.M = M;
    rec.stage = stage;
    rec.config = c;
    rec.status = r.ok ? CandidateStatus::ok : CandidateStatus::wrong_result;
    rec.reason = r.reason;
    rec.rel_error = r.rel_error;
    log_->write(rec);
  }
  return r;
}

bool MeasureDoor::out_of_time() const { return ev_.clock_s() >= budget_.deadline_s; }

bool MeasureDoor::stage_out_of_time() const {
  const double now = ev_.clock_s();
  return now >= budget_.deadline_s || now >= budget_.stage_deadline_s;
}

bool MeasureDoor::budget_stops(int M, Stage stage, bool sweep_only) {
  const long served = served_[{M, static_cast<int>(stage)}];
  if (resume_) {
    const std::optional<long> after = resume_->stopped_after(M, stage);
    if (after && served >= *after) return true;  // the recorded run's budget stopped it here
    if (served < resume_->recorded(M, stage)) return false;  // still replaying: it went on
  }
  const bool stops = sweep_only ? out_of_time() : stage_out_of_time();
  if (stops && log_) {
    LogRecord rec;
    rec.kind = "stop";
    rec.M = M;
    rec.stage = stage;
    rec.after = served;
    log_->write(rec);
  }
  return stops;
}

std::vector<KernelConfig> Measured::by_median(const std::vector<KernelConfig>* among) const {
  std::vector<std::pair<double, KernelConfig>> ok;
  const auto add = [&](const KernelConfig& c, const CandidateResult& r) {
    if (r.status == CandidateStatus::ok && !r.times_s.empty())
      ok.emplace_back(median(r.times_s), c);
  };
  if (among) {
    for (const KernelConfig& c : *among) {
      if (auto it = results.find(c); it != results.end()) add(c, it->second);
    }
  } else {
    for (const auto& [c, r] : results) add(c, r);
  }
  std::stable_sort(ok.begin(), ok.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<KernelConfig> out;
  for (auto& [t, c] : ok) out.push_back(c);
  return out;
}

std::vector<KernelConfig> Measured::ranking() const {
  std::vector<KernelConfig> out = by_median();
  std::stable_partition(out.begin(), out.end(), [&](const KernelConfig& c) {
    return std::find(finalists.begin(), finalists.end(), c) != finalists.end();
  });
  if (leader) {
    auto it = std::find(out.begin(), out.end(), *leader);
    if (it != out.end()) std::rotate(out.begin(), it, it + 1);
  }
  return out;
}

}  // namespace moetune::tune
