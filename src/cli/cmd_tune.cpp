// moetune tune: the main job. --dry-run plans the sweep (no GPU); otherwise it measures on every
// visible GPU through the tuner's worker processes and writes the tables, sidecars and report.
// The hidden `worker` subcommand is the tuner's measuring process.
#include <fmt/format.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/shape_json.hpp"
#include "cli/tune_gpu.hpp"
#include "cuda/context.hpp"
#include "cuda/driver.hpp"
#include "moetune/error.hpp"
#include "moetune/fused_moe.hpp"
#include "moetune/tuner.hpp"
#include "report/report.hpp"

namespace moetune::cli {
namespace {

// Ctrl-C / SIGTERM during a sweep: the first raises the tuner's stop flag (TuneOptions::stop);
// the sweep ends after the measurement in flight and writes its outputs, then `tune` exits 130
// (128 + SIGINT, the shell's convention). A second one exits at once with 130: the log is flushed
// per record and every other file is written atomically, so nothing is left half written.
constexpr int kExitInterrupted = 130;
std::atomic<bool> g_stop{false};
static_assert(std::atomic<bool>::is_always_lock_free, "the signal handler needs a lock-free flag");

extern "C" void on_stop_signal(int) {
  // Async-signal-safe only: a lock-free atomic, write(2) and _exit(2).
  if (g_stop.exchange(true)) _exit(kExitInterrupted);
  static const char note[] =
      "\nmoetune: interrupted: finishing the measurement in flight, then writing what was "
      "measured (again to quit at once)\n";
  const ssize_t ignored = write(STDERR_FILENO, note, sizeof note - 1);
  (void)ignored;
}

// Installs on_stop_signal for SIGINT and SIGTERM for its lifetime.
class StopOnSignal {
 public:
  StopOnSignal() {
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;  // the worker pipes' reads already retry on EINTR; the rest resume
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~StopOnSignal() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  StopOnSignal(const StopOnSignal&) = delete;
  StopOnSignal& operator=(const StopOnSignal&) = delete;

 private:
  struct sigaction old_int_ {}, old_term_ {};
};

struct TuneCliOptions {
  std::string batch, serving, budget, gpus, out = ".", naming = "sglang", seed;
  const CLI::Option* batch_opt = nullptr;
  const CLI::Option* serving_opt = nullptr;
  const CLI::Option* budget_opt = nullptr;
  const CLI::Option* gpus_opt = nullptr;
  const CLI::Option* seed_opt = nullptr;
  bool dry_run = false, exhaustive = false, resume = false, force = false, no_report = false;
};

std::string duration_text(double s) {
  if (s < 90) return fmt::format("{:.0f} s", s);
  if (s < 5400) return fmt::format("{:.1f} min", s / 60);
  return fmt::format("{:.1f} h", s / 3600);
}

// --out must be a folder that exists or can be made: checked before any work, so that neither a
// dry run nor a sweep (which creates it only when it starts) goes on with a path it cannot write.
void check_out_dir(const std::string& out) {
  namespace fs = std::filesystem;
  if (out.empty()) throw InputError("out", "\"\"", "an empty path: name a folder");
  std::error_code ec;
  fs::path p = fs::absolute(out, ec);
  if (ec) throw InputError("out", out, "not a usable path: " + ec.message());
  while (!fs::exists(p, ec)) {  // the nearest part of the path that exists
    const fs::path parent = p.parent_path();
    if (parent == p) break;
    p = parent;
  }
  if (!fs::is_directory(p, ec)) {
    throw InputError("out", out, fmt::format("{} is a file, not a folder", p.string()));
  }
  // A file made and removed, not access(): root passes access() where nothing can be made
  // (/proc, some mounts).
  std::string probe = (p / ".moetune-out-probe-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) {
    throw InputError("out", out,
                     fmt::format("cannot write to {}: {}", p.string(), std::strerror(errno)));
  }
  ::close(fd);
  ::unlink(probe.c_str());
}

// Everything but the shape and GPU, from the flags; InputError on junk.
tune::TuneOptions tune_options(const GlobalOptions& g, const TuneCliOptions& o) {
  tune::TuneOptions t;
  if (given(o.batch_opt) && given(o.serving_opt)) {
    throw InputError("serving", o.serving, "give --batch or --serving, not both");
  }
  if (given(o.batch_opt)) t.batch = tune::parse_batch_list(o.batch);
  if (given(o.serving_opt)) t.batch = tune::serving_batch_sizes(o.serving);
  if (given(o.budget_opt)) t.budget_s = tune::parse_budget(o.budget);
  if (given(o.gpus_opt)) t.gpus = parse_positive_int("gpus", o.gpus);
  if (given(o.seed_opt)) t.seed = static_cast<std::uint64_t>(parse_positive_int("seed", o.seed));
  if (o.naming == "sglang") {
    t.naming = Naming::sglang;
  } else if (o.naming == "vllm") {
    t.naming = Naming::vllm;
  } else {
    throw InputError("naming", o.naming, "expected sglang or vllm");
  }
  check_out_dir(o.out);
  t.out_dir = o.out;
  t.exhaustive = o.exhaustive;
  t.resume = o.resume;
  t.force = o.force;
  t.dry_run = o.dry_run;
  t.write_report = !o.no_report;
  t.provenance.moetune_version = MOETUNE_VERSION;
  t.provenance.argv = g.argv;
  return t;
}

std::string pruned_text(const std::map<std::string, long>& pruned) {
  std::string t;
  for (const auto& [reason, count] : pruned) {
    if (count == 0) continue;
    t += fmt::format("{}{} {}", t.empty() ? "" : ", ", reason, count);
  }
  return t.empty() ? "-" : t;
}

int run_dry(const GlobalOptions& g, tune::TuneOptions& t) {
  tune::TunePlan p = tune::plan(t);
  if (g.json) {
    fmt::print("{}\n", tune::to_json(p).dump(2));
    return 0;
  }
  fmt::print("tune plan (dry run, nothing measured): {} on {}\n", shape_title(t.shape), t.gpu.name);
  fmt::print("tables: {} (moetune's kernel: not for a server's config folder)\n",
             (t.out_dir / config_file_name(t.shape, t.gpu.name, t.naming)).string());
  // The M column widens for batch sizes past 6 digits (e.g. a 10,000,000-token plan).
  std::size_t wm = 6;
  for (const tune::PlanRow& r : p.rows) wm = std::max(wm, std::to_string(r.M).size());
  fmt::print("{:>{}}  {:>7}  {:>10}  {:>9}  {}\n", "M", wm, "space", "candidates", "est", "pruned");
  for (const tune::PlanRow& r : p.rows) {
    fmt::print("{:>{}}  {:>7}  {:>10}  {:>9}  {}\n", r.M, wm, r.space, r.candidates,
               duration_text(r.estimated_s), pruned_text(r.pruned));
  }
  std::string budget;
  if (t.budget_s > 0) {
    budget = p.needed_seconds > t.budget_s
                 ? fmt::format(" (budget {}: the whole sweep needs about {}; each batch size "
                               "gets its share of what is left, so each is searched less, and "
                               "one the budget does not reach keeps the default)",
                               duration_text(t.budget_s), duration_text(p.needed_seconds))
                 : fmt::format(" (budget {})", duration_text(t.budget_s));
  }
  fmt::print("estimated: {} for {} batch size{} on {} GPU(s){}\n",
             duration_text(p.estimated_seconds), p.batch.size(), p.batch.size() == 1 ? "" : "s",
             t.gpus, budget);
  std::vector<report::ReportRow> rows(p.rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    rows[i].M = p.rows[i].M;
    rows[i].layer_kernels = p.rows[i].layer_kernels;
  }
  if (const std::string own = report::own_kernels_text(rows); !own.empty())
    fmt::print("note (the default configs): {}\n", own);
  return 0;
}

// A progress bar with ETA on a terminal (stderr), plain lines otherwise.
class CliProgress : public tune::ProgressSink {
 public:
  explicit CliProgress(bool tty) : tty_(tty) {}
  void started_M(int M, int index, int total, int worker) override {
    index_ = index;
    total_ = total;
    if (!tty_)
      fmt::print(stderr, "moetune: tuning M={} ({}/{}) on GPU {}\n", M, index + 1, total, worker);
  }
  void candidate_done(int M, tune::Stage stage, const KernelConfig&, const std::string&, int done,
                      int planned) override {
    if (!tty_) return;
    // GEMM1 fills the first half of this M's share, GEMM2 the second; `planned` is the plan's
    // estimate (halving stops early when the best separates), so the bar may jump ahead.
    const double stage_frac = planned > 0 ? std::min(1.0, double(done) / planned) : 0;
    const double m_frac = 0.5 * stage_frac + (stage == tune::Stage::down ? 0.5 : 0.0);
    const double frac = total_ > 0 ? (index_ + m_frac) / total_ : 0;
    const int width = 30;
    const int filled = std::clamp(static_cast<int>(frac * width), 0, width);
    fmt::print(stderr, "\r[{}{}] {:3.0f}%  M={} {} {}/~{}  ETA {}   ", std::string(filled, '#'),
               std::string(width - filled, '.'), frac * 100, M, tune::to_string(stage), done,
               planned, eta_);
  }
  void eta(double, double remaining_s) override { eta_ = duration_text(remaining_s); }
  void finished_M(const tune::MResult& row) override {
    if (tty_) fmt::print(stderr, "\r{:80}\r", "");
    fmt::print(stderr, "moetune: M={} {}\n", row.M, row.flag);
  }

 private:
  bool tty_;
  int index_ = 0, total_ = 0;
  std::string eta_ = "?";
};

std::string us_text(const std::optional<double>& us) {
  return us ? fmt::format("{:.1f}", *us) : std::string("-");
}

int run_sweep(const GlobalOptions& g, const TuneCliOptions& o, tune::TuneOptions& t) {
  CliProgress progress(isatty(STDERR_FILENO) != 0);
  StopOnSignal stop_on_signal;
  t.stop = &g_stop;
  tune::TuneResult result = run_tune_on_gpus(t, progress);
  report::ReportInput rep = report::report_input(t, result);
  const int code = result.interrupted ? kExitInterrupted : 0;
  if (g.json) {
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    auto num = [](const std::optional<double>& v) {
      return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
    };
    for (const report::ReportRow& r : rep.rows) {
      rows.push_back({{"M", r.M},
                      {"flag", r.flag},
                      {"default_us", num(r.default_us)},
                      {"tuned_us", num(r.tuned_us)},
                      {"tuned_ci95_us", {num(r.tuned_lo_us), num(r.tuned_hi_us)}},
                      {"floor_us", r.floor_us},
                      {"bound", r.bound},
                      {"pct_floor", num(r.pct_floor)},
                      {"speedup", num(r.speedup)},
                      {"up", r.up_config},
                      {"down", r.down_config}});
      if (!r.layer_kernels.empty()) rows.back()["layer_kernels"] = r.layer_kernels;
    }
    nlohmann::ordered_json j{{"up_table", result.up_table.string()},
                             {"down_table", result.down_table.string()},
                             {"report", result.report_md.string()},
                             {"elapsed_s", result.elapsed_s},
                             {"measurements", result.measurements},
                             {"budget_exhausted", result.budget_exhausted},
                             {"interrupted", result.interrupted},
                             {"resume_command", result.resume_command},
                             {"rows", rows}};
    fmt::print("{}\n", j.dump(2));
    return code;
  }
  (void)o;
  fmt::print("{}\n", rep.title);
  std::size_t flag_width = 13;
  for (const report::ReportRow& r : rep.rows) flag_width = std::max(flag_width, r.flag.size());
  fmt::print("{:>6}  {:<{}}  {:>10}  {:>10}  {:>8}  {:>9}  {:>7}  {}\n", "M", "result", flag_width,
             "default_us", "tuned_us", "speedup", "floor_us", "%floor", "bound");
  for (const report::ReportRow& r : rep.rows) {
    fmt::print("{:>6}  {:<{}}  {:>10}  {:>10}  {:>8}  {:>9.1f}  {:>7}  {}\n", r.M, r.flag,
               flag_width,
               us_text(r.default_us), us_text(r.tuned_us),
               r.speedup ? fmt::format("{:.2f}x", *r.speedup) : "-", r.floor_us,
               r.pct_floor ? fmt::format("{:.0f}%", *r.pct_floor) : "-", r.bound);
  }
  fmt::print("{} measurements in {}{}\n", result.measurements, duration_text(result.elapsed_s),
             result.budget_exhausted ? " (budget exhausted: M not reached keep the default)" : "");
  if (const std::string own = report::own_kernels_text(rep.rows); !own.empty())
    fmt::print("note: {}\n", own);
  for (const tune::MResult& row : result.rows) {
    if (tune::layer_path_moved(row))
      fmt::print("note: M={}: moetune's layer runs `{}` with the default configs, `{}` with this "
                 "table: time it both ways with `bench` before serving (the report's notes)\n",
                 row.M, row.default_layer_kernels, row.layer_kernels);
  }
  fmt::print("tables:  {}\n         {}\n", result.up_table.string(), result.down_table.string());
  if (!result.report_md.empty()) {
    fmt::print("report:  {}\n         {}\n", result.report_md.string(),
               result.report_html.string());
  }
  fmt::print(
      "These tables configure moetune's kernel: do not copy them into a server's config "
      "folder.\n");
  if (result.interrupted) {
    fmt::print(
        "interrupted: the batch sizes marked \"{}\" keep the default; continue with:\n  {}\n",
        tune::kInterruptedFlag, result.resume_command);
  }
  return code;
}

int run_tune_command(const GlobalOptions& g, const TuneCliOptions& o) {
  tune::TuneOptions t = tune_options(g, o);
  t.shape = resolve_shape(g);
  require_runnable(t.shape);
  tune::check_token_slots(t.batch, t.shape.topk);
  if (g.given("gpu")) (void)require_gpu(g.gpu);  // a misspelt --gpu is bad input, GPU or not
  if (!o.dry_run) {
    std::string why;
    if (!cuda::gpu_available(&why)) {
      throw GpuUnavailable(why + "; `moetune tune --dry-run` plans the sweep without a GPU");
    }
    // --gpus defaults to every visible GPU for a sweep (the dry run plans for one).
    if (!given(o.gpus_opt)) t.gpus = std::max(1, cuda::device_count());
  }
  t.gpu = o.dry_run ? resolve_gpu(g) : resolve_local_gpu(g);  // a sweep measures this GPU
  check_dtype_on_gpu(t.shape, t.gpu);
  require_layer_runs(t.shape, t.gpu);
  t.shape_json = nlohmann::json(shape_json(t.shape, t.gpu));
  // What moetune's layer runs with a pair at M (no GPU needed: FusedMoe only plans here).
  t.layer_kernels = [shape = t.shape, gpu = t.gpu](int M, const KernelConfig& up,
                                                   const KernelConfig& down) {
    return std::string(FusedMoe(shape, gpu, {{M, up}}, {{M, down}}).layer_kernels(M));
  };
  if (o.dry_run) return run_dry(g, t);
  return run_sweep(g, o, t);
}

}  // namespace

Commands register_tune(CLI::App& app, const GlobalOptions& g) {
  auto o = std::make_shared<TuneCliOptions>();
  CLI::App* sub = app.add_subcommand(
      "tune", "the main job: tuned config tables (up and down GEMMs), sidecars and a report");
  o->batch_opt = sub->add_option("--batch", o->batch,
                                 "batch sizes, e.g. 1,8,64 (default: the "
                                 "common 18)")
                     ->type_name("M,...");
  o->serving_opt = sub->add_option("--serving", o->serving,
                                   "a serving profile instead of --batch, e.g. "
                                   "concurrency=1..64,spec=3")
                       ->type_name("PROFILE");
  o->budget_opt =
      sub->add_option("--budget", o->budget, "wall-time cap, e.g. 5m, 1h30m")->type_name("TIME");
  o->gpus_opt = sub->add_option("--gpus", o->gpus, "GPUs to use (default: all visible; the dry run plans for 1)")->type_name("N");
  sub->add_option("--out", o->out, "folder for the tables, sidecars, log and report (default .)")
      ->type_name("DIR");
  sub->add_option("--naming", o->naming, "table file names: sglang (default) or vllm")
      ->type_name("STYLE");
  o->seed_opt = sub->add_option("--seed", o->seed, "random seed, a positive integer")->type_name("N");
  sub->add_flag("--dry-run", o->dry_run, "plan only: space, pruning, candidates, time (no GPU)");
  sub->add_flag("--exhaustive", o->exhaustive, "time every valid config (first-round replays; the default and those within 10% of the best: half the finalists' replays more): the tuner's quality check");
  sub->add_flag("--resume", o->resume,
                "continue an interrupted run: reuse the measurements of the log in --out "
                "(Ctrl-C or SIGTERM ends a run after the measurement in flight, writes the "
                "tables, sidecars and report for the batch sizes finished and exits 130)");
  sub->add_flag("--force", o->force, "overwrite tables recorded for another K or kernel");
  sub->add_flag("--no-report", o->no_report, "skip the Markdown/HTML report");

  Commands out{{sub, [&g, o] { return run_tune_command(g, *o); }}};
  Commands worker = register_worker(app);
  out.insert(out.end(), worker.begin(), worker.end());
  return out;
}

}  // namespace moetune::cli
