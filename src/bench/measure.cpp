// The measurement phases and the stopping rule, GPU-independent.
#include "bench/measure.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "bench/graph_replay.hpp"
#include "moetune/error.hpp"

namespace moetune::bench {
namespace {

void validate(const MeasureOptions& o) {
  auto bad = [](const char* field, double v, const char* why) {
    throw InputError(field, std::to_string(v), why);
  };
  if (!o.hot && o.rotation < 1) bad("rotation", o.rotation, "must be >= 1");
  if (o.min_calls_per_replay < 1)
    bad("min_calls_per_replay", o.min_calls_per_replay, "must be >= 1");
  if (o.max_calls_per_replay < o.min_calls_per_replay) {
    bad("max_calls_per_replay", o.max_calls_per_replay, "must be >= min_calls_per_replay");
  }
  if (o.calls_per_replay < 0) bad("calls_per_replay", o.calls_per_replay, "must be >= 0");
  if (o.min_replays < 1) bad("min_replays", o.min_replays, "must be >= 1");
  if (o.max_replays < o.min_replays) bad("max_replays", o.max_replays, "must be >= min_replays");
  if (o.batch_replays < 1) bad("batch_replays", o.batch_replays, "must be >= 1");
  if (o.warmup_replays < 0) bad("warmup_replays", o.warmup_replays, "must be >= 0");
}

int step_of(const MeasureOptions& o) { return o.hot ? 1 : o.rotation; }

// The samples not flagged as throttled (possibly none): what the stopping rule looks at.
std::vector<double> unthrottled(const Samples& s) {
  std::vector<double> kept;
  for (std::size_t i = 0; i < s.per_call_s.size(); ++i) {
    if (!s.throttled[i]) kept.push_back(s.per_call_s[i]);
  }
  return kept;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::vector<double> Samples::kept_s() const {
  std::vector<double> kept;
  for (std::size_t i = 0; i < per_call_s.size(); ++i) {
    if (i >= throttled.size() || !throttled[i]) kept.push_back(per_call_s[i]);
  }
  return kept.empty() ? per_call_s : kept;  // all throttled: clock.throttled says so
}

Summary Samples::summary() const { return summarize(kept_s()); }

int choose_calls_per_replay(double call_s, const MeasureOptions& opts) {
  const int step = step_of(opts);
  auto round_up = [&](long long n) { return (n + step - 1) / step * step; };
  long long r = round_up(opts.min_calls_per_replay);
  if (call_s > 0 && std::isfinite(call_s)) {
    r = std::max(r, round_up(static_cast<long long>(std::ceil(opts.target_replay_s / call_s))));
  } else {
    r = opts.max_calls_per_replay;  // unknown (zero) call time: as long a replay as allowed
  }
  long long cap = std::max<long long>(step, opts.max_calls_per_replay / step * step);
  return static_cast<int>(std::min(r, cap));
}

std::vector<int> replay_call_indices(int R, const MeasureOptions& opts) {
  std::vector<int> idx(static_cast<std::size_t>(R));
  for (int i = 0; i < R; ++i) idx[i] = opts.hot ? 0 : i % opts.rotation;
  return idx;
}

Samples measure_with(ReplayDevice& device, const MeasureOptions& opts) {
  validate(opts);
  const auto t0 = std::chrono::steady_clock::now();
  Samples s;
  s.hot = opts.hot;
  s.rotation = opts.hot ? 1 : opts.rotation;

  // Probe: one eager pass over every call index (loads modules, touches buffers), then a timed
  // one. Eager calls include launch gaps, so the estimate errs long and R errs short; the first
  // replay corrects it below.
  std::vector<int> one_pass = replay_call_indices(step_of(opts), opts);
  device.time_eager(one_pass);
  s.probe_call_s = device.time_eager(one_pass) / static_cast<double>(one_pass.size());

  int R = opts.calls_per_replay > 0 ? opts.calls_per_replay
                                    : choose_calls_per_replay(s.probe_call_s, opts);
  device.capture(replay_call_indices(R, opts));
  double clock = 0;
  if (opts.calls_per_replay == 0) {
    // A graph runs without launch gaps: re-choose R from one replay's real per-call time.
    std::vector<double> first = device.replay(2, &clock);
    double call_s = first.back() / R;
    int better = choose_calls_per_replay(call_s, opts);
    if (better > R) {
      R = better;
      device.capture(replay_call_indices(R, opts));
    }
  }
  s.calls_per_replay = R;

  // Warm-up: at least warmup_replays and at least warmup_min_s of GPU time.
  double warm_s = 0;
  int warm = 0;
  while (warm < opts.warmup_replays || (warm_s < opts.warmup_min_s && warm < opts.max_replays)) {
    int n = std::max(1, std::min(opts.batch_replays, opts.max_replays));
    for (double t : device.replay(n, &clock)) warm_s += t;
    warm += n;
  }
  s.warmup_replays = warm;

  // Timed replays in batches until stable, or a cap.
  s.clock.default_mhz = device.default_clock_mhz();
  const auto t_timed = std::chrono::steady_clock::now();
  while (true) {
    int n = std::min(opts.batch_replays, opts.max_replays - static_cast<int>(s.per_call_s.size()));
    clock = 0;
    std::vector<double> times = device.replay(n, &clock);
    for (double t : times) {
      s.per_call_s.push_back(t / R);
      s.sm_clock_mhz.push_back(clock);
      s.throttled.push_back(clock > 0 && s.clock.default_mhz > 0 &&
                            is_throttled(clock, s.clock.default_mhz));
    }
    std::vector<double> kept = unthrottled(s);
    if (is_stable(kept, opts.stable_rel_tol, opts.min_replays)) {
      s.stop_reason = "stable";
      break;
    }
    if (static_cast<int>(s.per_call_s.size()) >= opts.max_replays) {
      s.stop_reason = "max_replays";
      break;
    }
    if (seconds_since(t_timed) >= opts.max_time_s &&
        static_cast<int>(s.per_call_s.size()) >= opts.min_replays) {
      s.stop_reason = "max_time";
      break;
    }
  }

  // Clock summary over the samples that have a reading.
  std::vector<double> known;
  for (double c : s.sm_clock_mhz) {
    if (c > 0) known.push_back(c);
  }
  if (!known.empty()) {
    s.clock.median_mhz = median(known);
    s.clock.min_mhz = *std::min_element(known.begin(), known.end());
  }
  s.clock.throttled = static_cast<int>(std::count(s.throttled.begin(), s.throttled.end(), true));
  s.wall_s = seconds_since(t0);
  return s;
}

Samples measure(const EnqueueFn& enqueue, const MeasureOptions& opts) {
  GraphReplay device(enqueue, opts.device);
  return measure_with(device, opts);
}

}  // namespace moetune::bench
