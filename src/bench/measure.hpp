// Measurement of one enqueued call (DESIGN.md "Measurement"), in fixed phases as nvbench does:
// probe (eager calls, estimate the time of one), choose R, capture a CUDA graph of R calls,
// warm up, then timed replays in back-to-back batches until the median is stable (moetune_perf's
// is_stable) or a replay/time cap is reached. One sample = one replay's time / R.
//
// Cold (default): call i of a replay gets call_index = i % rotation, and the caller rotates its
// >= 16 routing sets / buffers by that index so the working set exceeds twice the L2. Hot: every
// call gets index 0 (the cache-resident number).
#pragma once
#include <cuda.h>

#include <functional>
#include <string>
#include <vector>

#include "moetune/stats.hpp"

namespace moetune::bench {

// Enqueues one call on `stream` (no synchronisation inside: it is captured into a graph).
using EnqueueFn = std::function<void(CUstream stream, int call_index)>;

struct MeasureOptions {
  bool hot = false;          // all calls use call_index 0
  int rotation = 16;         // distinct call indices in cold mode (the caller's sets)
  int calls_per_replay = 0;  // R; 0 = choose_calls_per_replay()
  int min_calls_per_replay = 16;
  int max_calls_per_replay = 1024;
  double target_replay_s = 200e-6;  // a replay should last at least this long
  int warmup_replays = 3;           // untimed replays after capture (at least this many)
  double warmup_min_s = 0.02;       // ... and at least this much GPU time
  int min_replays = 10;             // is_stable needs at least this many samples
  int max_replays = 200;
  double max_time_s = 5.0;        // wall-time cap of the timed phase
  double stable_rel_tol = 0.005;  // relative standard error of the median
  int batch_replays = 10;         // replays enqueued back to back between host syncs
  int device = -1;                // ordinal for NVML clock reads; -1 = the current context's
};

struct ClockLog {
  double default_mhz = 0;  // NVML default application SM clock (0 = unknown)
  double median_mhz = 0;   // of the per-sample clocks (0 = unknown)
  double min_mhz = 0;
  int throttled = 0;  // samples below 75% of default_mhz (moetune::is_throttled)
};

struct Samples {
  std::vector<double> per_call_s;    // one per timed replay: replay time / R
  std::vector<double> sm_clock_mhz;  // one per sample, read while its batch ran (0 = unknown)
  std::vector<bool> throttled;       // one per sample
  int calls_per_replay = 0;          // R
  int rotation = 1;                  // call indices used (1 when hot)
  bool hot = false;
  int warmup_replays = 0;
  double probe_call_s = 0;  // eager estimate of one call, launch gaps included
  std::string stop_reason;  // "stable", "max_replays", "max_time"
  double wall_s = 0;        // the whole measurement, capture and warm-up included
  ClockLog clock;

  // The samples that were not throttled (all of them when the default clock is unknown, or
  // when every sample was throttled: clock.throttled == n then says so).
  std::vector<double> kept_s() const;
  Summary summary() const;  // summarize(kept_s())
};

// The GPU side of a measurement, apart so that the phases and stopping can be tested with
// synthetic numbers (no GPU). GraphReplay (graph_replay.hpp) is the CUDA implementation.
class ReplayDevice {
 public:
  virtual ~ReplayDevice() = default;
  // Enqueues the calls with these indices eagerly (no graph) and returns their total time (s).
  virtual double time_eager(const std::vector<int>& call_indices) = 0;
  // Captures one graph running the calls with these indices in order (replaces any previous).
  virtual void capture(const std::vector<int>& call_indices) = 0;
  // Runs `count` replays back to back and returns each one's time (s). `clock_mhz` receives the
  // SM clock read while they ran (0 = unknown).
  virtual std::vector<double> replay(int count, double* clock_mhz) = 0;
  // The reference for throttling: NVML default application clock, else max clock; 0 = unknown.
  virtual double default_clock_mhz() = 0;
};

// R: the smallest multiple of the rotation (1 when hot) that is >= min_calls_per_replay and
// makes a replay last >= target_replay_s at `call_s` per call, capped at max_calls_per_replay
// (rounded down to a multiple of the rotation, never below one rotation).
int choose_calls_per_replay(double call_s, const MeasureOptions& opts);
// The call indices of one replay of R calls.
std::vector<int> replay_call_indices(int R, const MeasureOptions& opts);

// The phases over any ReplayDevice. Throws InputError for nonsensical options.
Samples measure_with(ReplayDevice& device, const MeasureOptions& opts);

// The real thing on the current context: a GraphReplay of `enqueue` on a fresh stream.
Samples measure(const EnqueueFn& enqueue, const MeasureOptions& opts = {});

}  // namespace moetune::bench
