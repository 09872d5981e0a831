// The sweep: per batch size M, tune up (all BLOCK_SIZE_M) then down restricted to up's
// BLOCK_SIZE_M (one alignment), with the trust rule and accuracy checks; batch sizes go from a
// queue to one thread per evaluator (GPU). Writes the tables, sidecars, the log and the report.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <deque>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/json_text.hpp"
#include "moetune/error.hpp"
#include "moetune/roofline.hpp"
#include "moetune/stats.hpp"
#include "moetune/tuner.hpp"
#include "report/report.hpp"
#include "tune/evaluator.hpp"
#include "tune/record_log.hpp"
#include "tune/strategy.hpp"

namespace moetune::tune {
namespace {

// Replay-wise sum of two stages' per-replay times (the shorter length).
std::vector<double> add_replays(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> out(std::min(a.size(), b.size()));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = a[i] + b[i];
  return out;
}

bool ok_times(const Measured& m, const KernelConfig& c) {
  auto it = m.results.find(c);
  return it != m.results.end() && it->second.status == CandidateStatus::ok &&
         it->second.times_s.size() >= 2;
}

// Shared state of the sweep across worker threads.
struct Shared {
  const TuneOptions* opts = nullptr;
  LogWriter* log = nullptr;
  ResumeCache* resume = nullptr;
  SerialProgress* progress = nullptr;
  std::mutex mutex;       // guards everything below
  std::deque<int> queue;  // indices into batch
  std::vector<int> batch;
  std::map<int, std::pair<KernelConfig, KernelConfig>> winners;  // M -> (up, down) tuned
  std::vector<MResult> rows;
  std::atomic<long> measurements{0}, resumed{0};
  std::atomic<bool> budget_exhausted{false};
  std::atomic<bool> interrupted{false};  // the stop flag left some M unfinished
  int in_flight = 0;  // Ms being tuned now on any worker (under mutex): the budget's share
};

// The chosen configs of the nearest tuned Ms (by |log2 M ratio|), for warm starts.
std::vector<std::pair<KernelConfig, KernelConfig>> neighbour_seeds(Shared& sh, int M, int count) {
  std::lock_guard<std::mutex> lock(sh.mutex);
  std::vector<std::pair<double, int>> near;
  for (const auto& [m, w] : sh.winners) near.emplace_back(std::abs(std::log2(double(m) / M)), m);
  std::sort(near.begin(), near.end());
  std::vector<std::pair<KernelConfig, KernelConfig>> out;
  for (std::size_t i = 0; i < near.size() && int(i) < count; ++i) {
    out.push_back(sh.winners.at(near[i].second));
  }
  return out;
}

// Picks the stage's config: the fastest measured config that passes the accuracy check
// replaces the baseline only when compare() says faster; else the baseline is kept.
//
// The verdict uses a fresh confirmation measurement of the winner and the baseline (replays
// `confirm_replays` each): the search's own samples chose the winner, so they are biased in its
// favour (the best of many noisy medians looks faster than it is).
StageOutcome decide(int M, Stage stage, const Measured& m, const KernelConfig& baseline,
                    MeasureDoor& door, int confirm_replays) {
  StageOutcome out;
  out.default_config = baseline;
  out.chosen = baseline;
  out.measured = static_cast<int>(m.results.size());
  out.neighbourhood_rounds = m.neighbourhood_rounds;
  out.neighbours_timed = m.neighbours_timed;
  out.neighbourhood_moves = m.neighbourhood_moves;
  for (const auto& [c, r] : m.results) {
    if (r.status != CandidateStatus::ok) ++out.failures[std::string(to_string(r.status))];
  }
  if (ok_times(m, baseline)) {
    out.default_times_s = m.results.at(baseline).times_s;
    out.default_summary = summarize(out.default_times_s);
  }
  std::vector<KernelConfig> ranked = m.ranking();
  ranked.erase(std::remove_if(ranked.begin(), ranked.end(),
                              [&](const KernelConfig& c) { return !ok_times(m, c); }),
               ranked.end());
  for (std::size_t i = 0; i < ranked.size(); ++i) {
    const KernelConfig& c = ranked[i];
    if (!(c == baseline)) {
      const CheckResult check = door.check(M, stage, c);
      if (!check.ok) {
        ++out.failures["wrong_result"];
        out.notes.push_back(fmt::format(
            "{} failed the accuracy check (error {:.3g}{}{}); next "
            "taken",
            config_name(c), check.rel_error, check.reason.empty() ? "" : ": ", check.reason));
        continue;
      }
    }
    out.winner = c;
    out.winner_times_s = m.results.at(c).times_s;
    out.winner_summary = summarize(out.winner_times_s);
    for (std::size_t j = i + 1; j < ranked.size(); ++j) {
      out.runner_up = ranked[j];
      out.winner_vs_runner_up = compare(out.winner_times_s, m.results.at(ranked[j]).times_s);
      break;
    }
    if (!out.default_times_s.empty() && !(c == baseline)) {
      // Never judged on the search's samples: a config that fails its confirmation is out (the
      // next ranked is taken), and a default that fails it is kept unjudged.
      const auto fresh = door.measure(M, stage, {c, baseline}, confirm_replays);
      const auto usable = [&](std::size_t i) {
        return fresh.size() == 2 && fresh[i].status == CandidateStatus::ok &&
               fresh[i].times_s.size() >= 2;
      };
      if (!usable(0)) {
        const std::string status =
            fresh.size() == 2 ? std::string(to_string(fresh[0].status)) : "no result";
        ++out.failures[status];
        out.notes.push_back(fmt::format("{} failed its confirmation ({}{}{}); next taken",
                                        config_name(c), status,
                                        fresh.size() == 2 && !fresh[0].reason.empty() ? ": " : "",
                                        fresh.size() == 2 ? fresh[0].reason : ""));
        out.winner.reset();
        out.runner_up.reset();
        out.winner_vs_runner_up.reset();
        continue;
      }
      if (!usable(1)) {
        out.notes.push_back(fmt::format(
            "the default failed its confirmation ({}): kept, {} not judged against it",
            fresh.size() == 2 ? std::string(to_string(fresh[1].status)) : "no result",
            config_name(c)));
        break;
      }
      out.winner_times_s = fresh[0].times_s;
      out.winner_summary = summarize(out.winner_times_s);
      out.default_times_s = fresh[1].times_s;
      out.default_summary = summarize(out.default_times_s);
      out.winner_vs_default = compare(out.winner_times_s, out.default_times_s);
      if (out.winner_vs_default->verdict == Verdict::faster) out.chosen = c;
    } else if (out.default_times_s.empty() && !(c == baseline)) {
      // The default failed in the search: nothing to judge the winner against, so the default
      // stays (tune_one keeps both stages' defaults for this M).
      out.notes.push_back(fmt::format(
          "the default failed to run: {} measured best, not judged; the default kept",
          config_name(c)));
    }
    // The default ranked first: no verdict (a comparison with itself would read "within noise").
    break;
  }
  if (out.chosen == baseline) {
    out.chosen_times_s = out.default_times_s;
  } else {
    out.chosen_times_s = out.winner_times_s;
  }
  if (!out.chosen_times_s.empty()) out.chosen_summary = summarize(out.chosen_times_s);
  return out;
}

Measured run_strategy(const StageSearch& s, MeasureDoor& door) {
  return s.opts->exhaustive ? exhaustive(s, door) : successive_halving(s, door);
}

MResult tune_one(Shared& sh, Evaluator& ev, int M, double sweep_start_s, int remaining_Ms,
                 int workers) {
  const TuneOptions& o = *sh.opts;
  MResult row;
  row.M = M;
  row.floor = roofline_row(o.shape, spec_ceilings(o.shape, o.gpu), M);
  const KernelConfig up_default = default_config(o, M, Stage::up);
  const KernelConfig down_default = default_config(o, M, Stage::down);
  row.up.default_config = row.up.chosen = up_default;
  row.down.default_config = row.down.chosen = down_default;

  Budget budget;
  if (o.budget_s > 0) {
    budget.deadline_s = sweep_start_s + o.budget_s;
    // This M's fair share of what is left, half to each stage.
    const double left_s = budget.deadline_s - ev.clock_s();
    const double share_s = left_s * workers / std::max(1, remaining_Ms);
    budget.stage_deadline_s = ev.clock_s() + share_s / 2;
  }
  MeasureDoor door(ev, sh.log, sh.resume, sh.progress, budget, o.stop);
  // The sweep's deadline passed before this M began (a stop record, so --resume agrees).
  if (door.budget_stops(M, Stage::up, /*sweep_only=*/true)) {
    sh.budget_exhausted = true;
    return row;  // not reached
  }

  const auto seeds = neighbour_seeds(sh, M, o.neighbour_seeds);
  std::vector<KernelConfig> up_seeds, down_seeds;
  for (const auto& [u, d] : seeds) up_seeds.push_back(u), down_seeds.push_back(d);

  // Up: every BLOCK_SIZE_M.
  const StagePlan up_plan = plan_stage(o, M, Stage::up, std::nullopt, up_seeds);
  door.set_planned(static_cast<int>(expected_evaluations(o, up_plan.candidates.size())));
  const Measured up_m = run_strategy({M, Stage::up, up_plan.candidates, up_default, &o}, door);
  row.up = decide(M, Stage::up, up_m, up_default, door, o.max_replays);
  if (up_m.stopped_by_budget && door.out_of_time()) sh.budget_exhausted = true;
  if (row.up.default_times_s.empty()) {
    // Up's default has no times (it failed, or the sweep's time ran out first): the row cannot
    // be judged against the defaults, so it keeps them, and down is not searched for nothing.
    sh.measurements += door.measurements();
    sh.resumed += door.resumed();
    row.up.chosen = up_default;
    row.reached = row.up.measured > 0;
    row.flag = row.reached ? "kept default" : "not reached";
    if (row.reached) row.down.notes.push_back("down not searched: up's default has no times");
    return row;
  }

  // Down: the up choice's BLOCK_SIZE_M. Its baseline is the default with that BLOCK_SIZE_M.
  const int block_m = row.up.chosen.BLOCK_SIZE_M;
  const KernelConfig down_baseline = down_baseline_for(o, M, block_m);
  if (o.budget_s > 0) {
    door.budget().stage_deadline_s = std::max(
        door.budget().stage_deadline_s, ev.clock_s() + (door.budget().deadline_s - ev.clock_s()) *
                                                           workers / std::max(1, remaining_Ms) / 2);
  }
  const StagePlan down_plan = plan_stage(o, M, Stage::down, block_m, down_seeds);
  door.set_planned(static_cast<int>(expected_evaluations(o, down_plan.candidates.size())));
  const Measured down_m =
      run_strategy({M, Stage::down, down_plan.candidates, down_baseline, &o}, door);
  row.down = decide(M, Stage::down, down_m, down_baseline, door, o.max_replays);
  if (down_m.stopped_by_budget && door.out_of_time()) sh.budget_exhausted = true;

  // The default pair for the report (and the revert): down's own default, measured when the
  // up choice moved BLOCK_SIZE_M away from it.
  std::vector<double> down_default_times = row.down.default_times_s;
  if (!(down_baseline == down_default)) {
    const auto extra =
        door.measure(M, Stage::down, {down_default},
                     std::max<int>(2, static_cast<int>(row.down.default_times_s.size())));
    if (!extra.empty() && extra[0].status == CandidateStatus::ok)
      down_default_times = extra[0].times_s;
  }
  sh.measurements += door.measurements();
  sh.resumed += door.resumed();

  // The budget ran out between the stages: up keeps its confirmed winner when that needs no
  // other alignment than the default's (down keeps its default); otherwise both keep defaults.
  const bool down_unmeasured = row.down.measured == 0;
  if (!row.up.default_times_s.empty() && down_unmeasured && !(row.up.chosen == up_default) &&
      row.up.chosen.BLOCK_SIZE_M == up_default.BLOCK_SIZE_M) {
    row.down.chosen = down_default;
    row.reached = true;
    row.flag = "tuned";
    row.down.notes.push_back("down not reached (budget): its default kept");
    return row;
  }
  if (row.up.default_times_s.empty() || down_default_times.empty() ||
      row.down.chosen_times_s.empty() || row.up.chosen_times_s.empty()) {
    // Nothing comparable measured (budget, or the defaults failed): keep the defaults.
    row.up.chosen = up_default;
    row.down.chosen = down_default;
    row.flag = "kept default";  // up's default has times (else returned above)
    row.reached = true;
    return row;
  }
  row.reached = true;
  row.default_total_s = add_replays(row.up.default_times_s, down_default_times);
  row.tuned_total_s = add_replays(row.up.chosen_times_s, row.down.chosen_times_s);
  row.default_total = summarize(row.default_total_s);
  row.tuned_total = summarize(row.tuned_total_s);
  const bool changed = !(row.up.chosen == up_default) || !(row.down.chosen == down_default);
  if (!changed) {
    const bool noise =
        (row.up.winner_vs_default && row.up.winner_vs_default->verdict == Verdict::within_noise) ||
        (row.down.winner_vs_default &&
         row.down.winner_vs_default->verdict == Verdict::within_noise);
    row.flag = noise ? "within noise" : "kept default";
    row.tuned_total_s = row.default_total_s;
    row.tuned_total = row.default_total;
    return row;
  }
  row.tuned_vs_default = compare(row.tuned_total_s, row.default_total_s);
  if (row.tuned_vs_default->verdict == Verdict::faster) {
    row.flag = "tuned";
    return row;
  }
  // The pair as a whole is not faster (e.g. down lost by the alignment up chose): revert.
  row.up.notes.push_back("tuned pair not faster than the default pair as a whole; reverted");
  row.up.chosen = up_default;
  row.down.chosen = down_default;
  row.flag =
      row.tuned_vs_default->verdict == Verdict::within_noise ? "within noise" : "kept default";
  row.tuned_total_s = row.default_total_s;
  row.tuned_total = row.default_total;
  return row;
}

void worker_loop(Shared& sh, Evaluator& ev, int worker, int workers) {
  const double start_s = ev.clock_s();
  int finished = 0;
  for (;;) {
    int index = 0, remaining = 0, sharing = 0;
    {
      std::lock_guard<std::mutex> lock(sh.mutex);
      if (sh.queue.empty()) return;
      // Stopped: no new batch size starts. The rest keep the rows run_tune prepared (the
      // defaults), as when the budget runs out, flagged as interrupted. Under --resume they still
      // start: an M the log holds in full finishes without the evaluator (see MeasureDoor).
      if (sh.opts->stop && sh.opts->stop->load() && sh.resume == nullptr) {
        for (int i : sh.queue) sh.rows[i].flag = kInterruptedFlag;
        sh.queue.clear();
        sh.interrupted = true;
        return;
      }
      index = sh.queue.front();
      sh.queue.pop_front();
      remaining = static_cast<int>(sh.queue.size()) + 1;
      // The budget's fair share counts the Ms the other GPUs are running too.
      sharing = remaining + sh.in_flight;
      ++sh.in_flight;
    }
    const int M = sh.batch[index];
    sh.progress->call(
        [&](ProgressSink& p) { p.started_M(M, index, static_cast<int>(sh.batch.size()), worker); });
    MResult row;
    try {
      row = tune_one(sh, ev, M, start_s, sharing, workers);
    } catch (const Interrupted& e) {
      // Stopped part way through M: a half-searched M has no verdict a complete run would give,
      // so it keeps its prepared default row; its records are in the log for --resume.
      sh.measurements += e.measurements;
      sh.resumed += e.resumed;
      sh.interrupted = true;
      std::lock_guard<std::mutex> lock(sh.mutex);
      sh.rows[index].flag = kInterruptedFlag;
      --sh.in_flight;
      continue;
    }
    ++finished;
    const double elapsed_s = ev.clock_s() - start_s;
    {
      std::lock_guard<std::mutex> lock(sh.mutex);
      if (row.flag == "tuned" || row.flag == "within noise" || row.flag == "kept default") {
        sh.winners[M] = {row.up.winner.value_or(row.up.chosen),
                         row.down.winner.value_or(row.down.chosen)};
      }
      sh.rows[index] = row;
      --sh.in_flight;
    }
    sh.progress->call([&](ProgressSink& p) {
      p.finished_M(row);
      const double per_M = elapsed_s / double(finished);
      p.eta(elapsed_s, per_M * double(remaining - 1) / workers);
    });
  }
}

// Refuses to overwrite a table whose sidecar records another K or kernel hash (unless force).
void check_overwrite(const TuneOptions& o, const std::filesystem::path& table) {
  const std::filesystem::path side = table.parent_path() / sidecar_name(table.filename().string());
  if (o.force || !std::filesystem::exists(side)) return;
  const std::string text = model::read_json_file_text(side, "out");  // a FIFO would block
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
    throw InputError("out", side.string(),
                     "the existing sidecar is not JSON; use --force to overwrite the table");
  }
  const int K = j.value("K", o.shape.K);
  const std::string hash = j.value("kernel_source_hash", o.provenance.kernel_source_hash);
  if (K != o.shape.K) {
    throw InputError("out", table.string(),
                     fmt::format("its sidecar records K={} (this run: K={}); a server reads the "
                                 "same file name for both; use --force to overwrite",
                                 K, o.shape.K));
  }
  if (hash != o.provenance.kernel_source_hash) {
    throw InputError("out", table.string(),
                     fmt::format("its sidecar records kernel_source_hash {} (this run: {}); use "
                                 "--force to overwrite",
                                 hash, o.provenance.kernel_source_hash));
  }
}

nlohmann::json summary_json(const Summary& s) {
  return {{"median_us", s.median_s * 1e6},
          {"ci95_lo_us", s.ci95_lo_s * 1e6},
          {"ci95_hi_us", s.ci95_hi_s * 1e6},
          {"n", s.n}};
}

nlohmann::json sidecar_json(const TuneOptions& o, const TuneResult& r, Stage stage) {
  const Provenance& p = o.provenance;
  nlohmann::json j;
  j["schema_version"] = kLogSchemaVersion;
  j["table"] = (stage == Stage::up ? r.up_table : r.down_table).filename().string();
  j["stage"] = std::string(to_string(stage));
  j["device"] = p.device_name.empty() ? o.gpu.name : p.device_name;
  j["driver"] = p.driver_version;
  j["cuda"] = p.cuda_version;
  j["nvrtc"] = p.nvrtc_version;
  j["moetune_version"] = p.moetune_version;
  j["git_revision"] = p.git_revision;
  j["kernel_source_hash"] = p.kernel_source_hash;
  j["K"] = o.shape.K;
  j["shape"] = {{"E", o.shape.E},
                {"E_global", o.shape.E_global},
                {"N", o.shape.N},
                {"K", o.shape.K},
                {"topk", o.shape.topk},
                {"dtype", std::string(to_string(o.shape.dtype))},
                {"block_shape",
                 o.shape.block_shape ? nlohmann::json(*o.shape.block_shape) : nlohmann::json()}};
  j["seed"] = o.seed;
  j["strategy"] = r.strategy;
  j["mode"] = "cold";
  j["log"] = r.log_path.filename().string();
  nlohmann::json entries = nlohmann::json::object();
  for (const MResult& row : r.rows) {
    const StageOutcome& s = stage == Stage::up ? row.up : row.down;
    nlohmann::json e;
    e["flag"] = row.flag;
    e["config"] = to_json(s.chosen);
    e["default_config"] = to_json(s.default_config);
    if (!s.default_times_s.empty()) e["default"] = summary_json(s.default_summary);
    if (!s.chosen_times_s.empty()) e["measured"] = summary_json(s.chosen_summary);
    if (s.winner) {
      e["winner"] = to_json(*s.winner);
      e["winner_measured"] = summary_json(s.winner_summary);
    }
    if (s.winner_vs_default) {
      e["winner_vs_default"] = {
          {"ratio", s.winner_vs_default->ratio},
          {"ci95", {s.winner_vs_default->ci95_lo, s.winner_vs_default->ci95_hi}},
          {"verdict", to_string(s.winner_vs_default->verdict)}};
    }
    if (s.winner_vs_runner_up) {
      e["margin_to_runner_up"] = {
          {"ratio", s.winner_vs_runner_up->ratio},
          {"ci95", {s.winner_vs_runner_up->ci95_lo, s.winner_vs_runner_up->ci95_hi}},
          {"verdict", to_string(s.winner_vs_runner_up->verdict)}};
    }
    if (s.runner_up) e["runner_up"] = to_json(*s.runner_up);
    e["measured_candidates"] = s.measured;
    if (s.neighbourhood_rounds > 0) {
      e["neighbourhood"] = {{"rounds", s.neighbourhood_rounds},
                            {"neighbours_timed", s.neighbours_timed},
                            {"moves", s.neighbourhood_moves}};
    }
    if (!s.failures.empty()) e["failures"] = s.failures;
    if (!s.notes.empty()) e["notes"] = s.notes;
    e["floor_us"] = row.floor.floor_us;
    if (!row.layer_kernels.empty()) e["layer_kernels"] = row.layer_kernels;
    entries[std::to_string(row.M)] = e;
  }
  j["entries"] = entries;
  return j;
}

// One argument for a POSIX shell: bare when it holds only safe characters, else single-quoted.
std::string shell_quoted(const std::string& a) {
  const bool bare = !a.empty() && a.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnop"
                                                      "qrstuvwxyz0123456789_-./=:,+@%") ==
                                      std::string::npos;
  if (bare) return a;
  std::string q = "'";
  for (char ch : a) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

std::string resume_command(const TuneOptions& opts) {
  std::vector<std::string> args = opts.provenance.argv;
  if (args.empty()) args = {"moetune", "tune", "--out", opts.out_dir.string()};
  if (std::find(args.begin(), args.end(), "--resume") == args.end()) args.push_back("--resume");
  std::string cmd;
  for (const std::string& a : args) {
    if (!cmd.empty()) cmd += ' ';
    cmd += shell_quoted(a);
  }
  return cmd;
}

}  // namespace

TuneResult run_tune(const TuneOptions& opts, Evaluator& evaluator, ProgressSink& progress) {
  EvaluatorPool pool;
  pool.add(evaluator);
  return run_tune(opts, pool, progress);
}

TuneResult run_tune(const TuneOptions& opts, EvaluatorPool& pool, ProgressSink& progress) {
  if (pool.size() == 0) throw InputError("gpus", "0", "no evaluator to measure with");
  TuneResult result;
  result.strategy = opts.exhaustive ? "exhaustive" : "successive_halving";
  result.up_table = up_table_path(opts);
  result.down_table = down_table_path(opts);
  result.up_sidecar = opts.out_dir / sidecar_name(result.up_table.filename().string());
  result.down_sidecar = opts.out_dir / sidecar_name(result.down_table.filename().string());
  result.log_path = log_path(opts);

  std::error_code ec;
  std::filesystem::create_directories(opts.out_dir, ec);
  if (ec) throw InputError("out", opts.out_dir.string(), "cannot create folder: " + ec.message());
  const nlohmann::json header = make_log_header(opts);
  std::optional<ResumeCache> resume;
  const bool append = opts.resume && std::filesystem::exists(result.log_path);
  if (append) {
    const RecordLog log = RecordLog::read(result.log_path);
    check_log_header(log.header(), header, result.log_path.string());
    resume.emplace(log);
  }
  check_overwrite(opts, result.up_table);
  check_overwrite(opts, result.down_table);

  LogWriter writer(result.log_path, header, append, &opts.gpu, &opts.shape);
  SerialProgress serial(progress);

  Shared sh;
  sh.opts = &opts;
  sh.log = &writer;
  sh.resume = resume ? &*resume : nullptr;
  sh.progress = &serial;
  sh.batch = tune_batch_sizes(opts);
  sh.rows.resize(sh.batch.size());
  for (std::size_t i = 0; i < sh.batch.size(); ++i) {
    sh.rows[i].M = sh.batch[i];
    sh.rows[i].floor = roofline_row(opts.shape, spec_ceilings(opts.shape, opts.gpu), sh.batch[i]);
    sh.rows[i].up.default_config = sh.rows[i].up.chosen =
        default_config(opts, sh.batch[i], Stage::up);
    sh.rows[i].down.default_config = sh.rows[i].down.chosen =
        default_config(opts, sh.batch[i], Stage::down);
    sh.queue.push_back(static_cast<int>(i));
  }

  const double wall_start =
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  const std::size_t workers =
      std::min<std::size_t>(pool.size(), std::max<std::size_t>(1, sh.batch.size()));
  if (workers == 1) {
    worker_loop(sh, pool.at(0), 0, 1);
  } else {
    std::vector<std::thread> threads;
    std::vector<std::exception_ptr> errors(workers);
    for (std::size_t w = 0; w < workers; ++w) {
      threads.emplace_back([&, w] {
        try {
          worker_loop(sh, pool.at(w), static_cast<int>(w), static_cast<int>(workers));
        } catch (...) {
          errors[w] = std::current_exception();
          std::lock_guard<std::mutex> lock(sh.mutex);
          sh.queue.clear();
        }
      });
    }
    for (auto& t : threads) t.join();
    for (auto& e : errors) {
      if (e) std::rethrow_exception(e);
    }
  }
  result.elapsed_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count() -
      wall_start;
  result.rows = std::move(sh.rows);
  result.measurements = sh.measurements;
  result.resumed = sh.resumed;
  result.budget_exhausted = sh.budget_exhausted;
  result.interrupted = sh.interrupted;
  if (result.interrupted) result.resume_command = resume_command(opts);
  for (MResult& row : result.rows) {
    result.up[row.M] = row.up.chosen;
    result.down[row.M] = row.down.chosen;
    row.layer_kernels = layer_kernels_of(opts, row.M, row.up.chosen, row.down.chosen);
    row.default_layer_kernels =
        layer_kernels_of(opts, row.M, row.up.default_config, row.down.default_config);
    if (layer_path_moved(row)) {
      row.up.notes.push_back(fmt::format(
          "moetune's layer runs `{}` here with the default configs and `{}` with this table "
          "(its up BLOCK_SIZE_M {}): the tuned times compare stage paths only; time the layer "
          "both ways (`bench --batch {} --config TABLE` and `bench --batch {}`) before serving "
          "with this entry",
          row.default_layer_kernels, row.layer_kernels, row.up.chosen.BLOCK_SIZE_M, row.M,
          row.M));
    }
  }

  write_config_table(result.up_table, result.up);
  write_config_table(result.down_table, result.down);
  write_file_atomic(result.up_sidecar, sidecar_json(opts, result, Stage::up).dump(2) + "\n");
  write_file_atomic(result.down_sidecar, sidecar_json(opts, result, Stage::down).dump(2) + "\n");
  if (opts.write_report) {
    std::string stem = result.up_table.filename().string();
    stem.resize(stem.size() - 5);
    result.report_md = opts.out_dir / (stem + ".report.md");
    result.report_html = opts.out_dir / (stem + ".report.html");
    const report::ReportInput in = report::report_input(opts, result);
    write_file_atomic(result.report_md, report::markdown(in));
    write_file_atomic(result.report_html, report::html(in));
  }
  return result;
}

}  // namespace moetune::tune
