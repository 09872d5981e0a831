// The sweep end to end on a SyntheticEvaluator: outputs (tables, sidecars, report) written
// atomically, one alignment, the trust rule, accuracy checks, the budget, the overwrite rule,
// several evaluators, an interrupted run (the stop flag) and its --resume.
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <functional>
#include <iostream>
#include <mutex>
#include <set>

#include <gtest/gtest.h>

#include "moetune/error.hpp"
#include "moetune/tuner.hpp"
#include "tune/cost_model.hpp"
#include "tune/evaluator.hpp"
#include "tune/record_log.hpp"
#include "tune/strategy.hpp"
#include "tune_test_util.hpp"

namespace moetune::tune {
namespace {

std::filesystem::path temp_dir(const std::string& name) {
  return testing::fresh_temp_dir("moetune_tune_" + name);
}

TuneOptions options(const std::filesystem::path& out, std::vector<int> batch) {
  TuneOptions o = testing::qwen_fp8_h200_options(out, std::move(batch));
  o.provenance.moetune_version = "0.1.0";
  o.seed = 42;
  return o;
}

// The model's time, off by up to 20% per config, plus a default that is 25% slow.
SyntheticOptions informative(const TuneOptions& o) {
  SyntheticOptions so;
  const MoeShape shape = o.shape;
  const GpuSpec gpu = o.gpu;
  so.time_s = [shape, gpu](int M, Stage stage, const KernelConfig& c) {
    const std::size_t h =
        std::hash<int>()(c.BLOCK_SIZE_M * 7 + c.BLOCK_SIZE_N * 131 + c.BLOCK_SIZE_K * 17 +
                         c.num_stages * 3 + c.SPLIT_K * 5 + c.num_warps * 11 + c.GROUP_SIZE_M);
    double t = predicted_time_s(shape, gpu, M, stage, c) * (1.0 + 0.2 * double(h % 97) / 97.0);
    if (c == moetune_default_config(shape, gpu, M, stage == Stage::down)) t *= 1.25;
    return t;
  };
  so.noise_rel = 0.02;
  return so;
}

std::set<std::string> files_in(const std::filesystem::path& dir) {
  std::set<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    names.insert(e.path().filename().string());
  }
  return names;
}

TEST(Tuner, WritesTablesSidecarsLogAndReportAtomically) {
  const auto out = temp_dir("outputs");
  const TuneOptions o = options(out, {1, 8, 64});
  SyntheticEvaluator ev(informative(o));
  ProgressSink quiet;
  const TuneResult r = run_tune(o, ev, quiet);

  const std::string up =
      "E=256,N=256,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128, 128]";
  EXPECT_EQ(files_in(out),
            (std::set<std::string>{up + ".json", up + "_down.json", up + ".meta.json",
                                   up + "_down.meta.json", up + ".tune.jsonl", up + ".report.md",
                                   up + ".report.html"}));
  // Tables hold every M, and nothing but batch-size keys.
  const ParsedTable t_up = read_config_table(r.up_table);
  const ParsedTable t_down = read_config_table(r.down_table);
  EXPECT_EQ(t_up.entries.size(), 3u);
  EXPECT_EQ(t_down.entries.size(), 3u);
  // One alignment: validation finds nothing, the shared BLOCK_SIZE_M included.
  const ValidationTarget target{o.shape.dtype, o.shape.block_shape, &o.gpu};
  EXPECT_TRUE(validate_table(t_up, target, &t_down).empty());
  for (const auto& [M, e] : t_up.entries) {
    EXPECT_EQ(e.config.BLOCK_SIZE_M, t_down.entries.at(M).config.BLOCK_SIZE_M) << M;
  }
  // Sidecar provenance.
  std::ifstream in(r.up_sidecar);
  const nlohmann::json side = nlohmann::json::parse(in);
  EXPECT_EQ(side.at("K"), 3072);
  EXPECT_EQ(side.at("kernel_source_hash"), "abc123");
  EXPECT_EQ(side.at("seed"), 42);
  EXPECT_EQ(side.at("device"), "NVIDIA H200");
  for (const char* M : {"1", "8", "64"}) {
    const auto& e = side.at("entries").at(M);
    EXPECT_GT(e.at("default").at("median_us").get<double>(), 0) << M;
    EXPECT_GT(e.at("measured").at("median_us").get<double>(), 0) << M;
    EXPECT_TRUE(e.contains("margin_to_runner_up")) << M;
    EXPECT_GT(e.at("floor_us").get<double>(), 0) << M;
    // The neighbourhood step ran: its neighbours are among the measured candidates.
    const auto& nb = e.at("neighbourhood");
    EXPECT_GE(nb.at("rounds").get<int>(), 1) << M;
    EXPECT_GT(nb.at("neighbours_timed").get<int>(), 0) << M;
    EXPECT_LT(nb.at("neighbours_timed").get<int>(), e.at("measured_candidates").get<int>()) << M;
    EXPECT_LE(nb.at("moves").get<int>(), nb.at("rounds").get<int>()) << M;
  }
  // The default is 25% slow everywhere: every M is tuned, faster than the default pair.
  for (const MResult& row : r.rows) {
    EXPECT_EQ(row.flag, "tuned") << row.M;
    EXPECT_LT(row.tuned_total.median_s, row.default_total.median_s) << row.M;
    ASSERT_TRUE(row.tuned_vs_default.has_value());
    EXPECT_EQ(row.tuned_vs_default->verdict, Verdict::faster);
  }
  EXPECT_GT(r.measurements, 0);
  std::filesystem::remove_all(out);
}

std::string file_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(Tuner, NamesWhereTheLayerRunsKernelsOfItsOwn) {
  // TuneOptions::layer_kernels (the CLI's: FusedMoe::layer_kernels) is asked with each M's chosen
  // pair and its default pair; its answer goes into the sidecars, the report (a column and a
  // paragraph naming the Ms whose entries configure only the stage path) and the plan; a tuned
  // entry that moves the layer off its own kernels gets a note; an InputError leaves the answer
  // unknown, and no hook says nothing.
  const auto out = temp_dir("layer_kernels");
  TuneOptions o = options(out, {1, 2, 8, 16, 64});
  std::mutex mu;
  std::map<int, std::vector<std::pair<KernelConfig, KernelConfig>>> asked;
  o.layer_kernels = [&](int M, const KernelConfig& up, const KernelConfig& down) {
    {
      std::lock_guard<std::mutex> lock(mu);
      asked[M].emplace_back(up, down);
    }
    if (M == 64) throw InputError("BLOCK_SIZE_M", "64", "refused");
    // M = 8: the sliced kernel with the default up config only (as a BLOCK_SIZE_M would).
    if (M == 8) return std::string(up == moetune_default_config(o.shape, o.gpu, 8) ? "sliced"
                                                                                   : "stages");
    return std::string(M <= 2 ? "decode" : "sliced");
  };
  SyntheticEvaluator ev(informative(o));
  ProgressSink quiet;
  const TuneResult r = run_tune(o, ev, quiet);
  ASSERT_EQ(r.rows.size(), 5u);
  const std::vector<std::string> want = {"decode", "decode", "stages", "sliced", ""};
  const std::vector<std::string> want_default = {"decode", "decode", "sliced", "sliced", ""};
  for (std::size_t i = 0; i < r.rows.size(); ++i) {
    const MResult& row = r.rows[i];
    EXPECT_EQ(row.layer_kernels, want[i]) << row.M;
    EXPECT_EQ(row.default_layer_kernels, want_default[i]) << row.M;
    // The pair the tables hold, then the default pair.
    ASSERT_EQ(asked.at(row.M).size(), 2u) << row.M;
    EXPECT_EQ(asked.at(row.M)[0].first, r.up.at(row.M)) << row.M;
    EXPECT_EQ(asked.at(row.M)[0].second, r.down.at(row.M)) << row.M;
    EXPECT_EQ(asked.at(row.M)[1].first, row.up.default_config) << row.M;
    EXPECT_EQ(asked.at(row.M)[1].second, row.down.default_config) << row.M;
    const bool switched = !row.up.notes.empty() &&
                          row.up.notes.back().find("the tuned times compare stage paths only") !=
                              std::string::npos;
    EXPECT_EQ(switched, row.M == 8) << row.M;
    EXPECT_EQ(layer_path_moved(row), row.M == 8) << row.M;
  }
  EXPECT_NE(r.up.at(8), moetune_default_config(o.shape, o.gpu, 8));  // tuned: 25% faster
  for (const auto& side_path : {r.up_sidecar, r.down_sidecar}) {
    const nlohmann::json side = nlohmann::json::parse(file_text(side_path));
    EXPECT_EQ(side.at("entries").at("1").at("layer_kernels"), "decode");
    EXPECT_EQ(side.at("entries").at("8").at("layer_kernels"), "stages");
    EXPECT_EQ(side.at("entries").at("16").at("layer_kernels"), "sliced");
    EXPECT_FALSE(side.at("entries").at("64").contains("layer_kernels"));
  }
  const std::string md = file_text(r.report_md);
  EXPECT_NE(md.find("its two decode kernels at M = 1 and 2 (`--no-decode-kernels` runs the stage "
                    "path there); its sliced GEMM kernel at M = 16 (`--no-sliced` runs the stage "
                    "path there). "),
            std::string::npos);
  EXPECT_NE(md.find("(bench and profile; check takes `--no-sliced`; "), std::string::npos);
  EXPECT_NE(md.find(" | sliced |\n"), std::string::npos);
  EXPECT_NE(md.find(" | — |\n"), std::string::npos);  // M = 64: unknown
  EXPECT_NE(md.find("- M=8: moetune's layer runs `sliced` here with the default configs and "
                    "`stages` with this table (its up BLOCK_SIZE_M "),
            std::string::npos);
  const std::string html = file_text(r.report_html);
  EXPECT_NE(html.find("(<code>--no-decode-kernels</code> runs the stage path there)"),
            std::string::npos);
  EXPECT_EQ(html.find("`--no"), std::string::npos);

  // The plan asks with the defaults.
  asked.clear();
  const TunePlan p = plan(o);
  ASSERT_EQ(p.rows.size(), 5u);
  EXPECT_EQ(p.rows[0].layer_kernels, "decode");
  EXPECT_EQ(p.rows[2].layer_kernels, "sliced");
  EXPECT_EQ(p.rows[4].layer_kernels, "");
  EXPECT_EQ(asked.at(8).at(0).first, moetune_default_config(o.shape, o.gpu, 8, false));
  EXPECT_EQ(asked.at(8).at(0).second.BLOCK_SIZE_M, asked.at(8).at(0).first.BLOCK_SIZE_M);
  EXPECT_EQ(asked.at(8).at(0).second,
            default_config(o, 8, Stage::down));  // down with up's BLOCK_SIZE_M
  const nlohmann::json pj = to_json(p);
  EXPECT_EQ(pj.at("plan").at(2).at("layer_kernels"), "sliced");
  EXPECT_FALSE(pj.at("plan").at(4).contains("layer_kernels"));

  // Rows that keep the defaults (an interrupted run) are named too, with no note.
  std::atomic<bool> stop{true};
  o.stop = &stop;
  o.force = true;
  const TuneResult stopped = run_tune(o, ev, quiet);
  for (const MResult& row : stopped.rows) {
    EXPECT_EQ(row.flag, kInterruptedFlag) << row.M;
    EXPECT_EQ(row.layer_kernels, row.default_layer_kernels) << row.M;
    EXPECT_TRUE(row.up.notes.empty()) << row.M;
  }
  EXPECT_EQ(stopped.rows[2].layer_kernels, "sliced");
  o.stop = nullptr;
  o.layer_kernels = nullptr;
  EXPECT_FALSE(to_json(plan(o)).at("plan").at(0).contains("layer_kernels"));
  std::filesystem::remove_all(out);
}

TEST(Tuner, TrustRuleKeepsTheDefaultWithinNoise) {
  const auto out = temp_dir("trust");
  const TuneOptions o = options(out, {1, 64});
  SyntheticOptions so;
  so.time_s = [](int, Stage, const KernelConfig&) { return 20e-6; };  // every config alike
  so.noise_rel = 0.02;
  SyntheticEvaluator ev(so);
  ProgressSink quiet;
  const TuneResult r = run_tune(o, ev, quiet);
  for (const MResult& row : r.rows) {
    EXPECT_EQ(row.flag, "within noise") << row.M;
    EXPECT_EQ(row.up.chosen, row.up.default_config) << row.M;
    EXPECT_EQ(row.down.chosen, row.down.default_config) << row.M;
    ASSERT_TRUE(row.up.winner_vs_default.has_value());
    EXPECT_EQ(row.up.winner_vs_default->verdict, Verdict::within_noise);
    EXPECT_EQ(r.up.at(row.M), moetune_default_config(o.shape, o.gpu, row.M, false));
  }
  std::filesystem::remove_all(out);
}

TEST(Tuner, AWrongWinnerIsDroppedAndTheNextTaken) {
  const auto out = temp_dir("wrong");
  const TuneOptions o = options(out, {8});
  // A clear favourite (the model's first choice, made twice as fast) that computes wrong results.
  const KernelConfig bad = plan_stage(o, 8, Stage::up, std::nullopt).candidates.front();
  SyntheticOptions so = informative(o);
  const auto base = so.time_s;
  so.time_s = [base, bad](int M, Stage s, const KernelConfig& c) {
    return c == bad ? 0.5 * base(M, s, c) : base(M, s, c);
  };
  so.wrong = {bad};
  SyntheticEvaluator ev(so);
  ProgressSink quiet;
  const TuneResult r = run_tune(o, ev, quiet);
  const MResult& row = r.rows.at(0);
  EXPECT_NE(row.up.chosen, bad);
  ASSERT_TRUE(row.up.winner.has_value());
  EXPECT_NE(*row.up.winner, bad);
  EXPECT_GE(row.up.failures.at("wrong_result"), 1);
  ASSERT_FALSE(row.up.notes.empty());
  EXPECT_NE(row.up.notes.front().find("accuracy"), std::string::npos);
  std::filesystem::remove_all(out);
}

TEST(Tuner, BudgetExhaustionFlagsUnreachedMsAndKeepsTheirDefaults) {
  const auto out = temp_dir("budget");
  TuneOptions o = options(out, {});
  o.budget_s = 60;  // simulated: 1 s per compile, 18 batch sizes
  SyntheticOptions so = informative(o);
  so.compile_s = 1.0;
  SyntheticEvaluator ev(so);
  ProgressSink quiet;
  const TuneResult r = run_tune(o, ev, quiet);
  EXPECT_TRUE(r.budget_exhausted);
  ASSERT_EQ(r.rows.size(), 18u);
  EXPECT_TRUE(r.rows.front().reached);
  int unreached = 0;
  for (const MResult& row : r.rows) {
    if (row.flag == "not reached") {
      ++unreached;
      EXPECT_FALSE(row.reached);
      EXPECT_EQ(r.up.at(row.M), moetune_default_config(o.shape, o.gpu, row.M, false));
    }
  }
  EXPECT_GT(unreached, 0);
  EXPECT_EQ(r.up.size(), 18u);  // the table still holds every M
  // The sweep stopped near the budget (one chunk of 8 configs may overrun it).
  EXPECT_LT(ev.clock_s(), 60 + 8 * (1.0 + 0.05) + 5);
  const std::string md = [&] {
    std::ifstream in(r.report_md);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  EXPECT_NE(md.find("not reached"), std::string::npos);
  std::filesystem::remove_all(out);
}

TEST(Tuner, BudgetEndingBetweenTheStagesKeepsOneAlignment) {
  const auto out = temp_dir("between");
  TuneOptions o = options(out, {64});
  o.budget_s = 5;  // the first chunk of up (8 compiles of 1 s) overruns it: down never starts
  SyntheticOptions so = informative(o);
  so.compile_s = 1.0;
  SyntheticEvaluator ev(so);
  ProgressSink quiet;
  const TuneResult r = run_tune(o, ev, quiet);
  const MResult& row = r.rows.at(0);
  EXPECT_TRUE(r.budget_exhausted);
  EXPECT_TRUE(row.reached);
  EXPECT_EQ(row.down.measured, 0);
  EXPECT_EQ(row.down.chosen, row.down.default_config);
  EXPECT_EQ(r.up.at(64).BLOCK_SIZE_M, r.down.at(64).BLOCK_SIZE_M);
  // The default is 25% slow, so up's first chunk already holds a confirmed faster config of the
  // default's BLOCK_SIZE_M: up keeps it, down keeps its default.
  EXPECT_EQ(row.flag, "tuned");
  EXPECT_NE(row.up.chosen, row.up.default_config);
  EXPECT_EQ(row.down.notes.back(), "down not reached (budget): its default kept");
  std::filesystem::remove_all(out);
}

TEST(Tuner, RefusesToOverwriteATableOfAnotherKUnlessForced) {
  const auto out = temp_dir("overwrite");
  TuneOptions o = options(out, {1});
  const auto side = out / sidecar_name(up_table_path(o).filename().string());
  write_file_atomic(side, R"({"K": 7168, "kernel_source_hash": "abc123"})");
  SyntheticEvaluator ev(informative(o));
  ProgressSink quiet;
  try {
    run_tune(o, ev, quiet);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "out");
    EXPECT_NE(e.reason().find("K=7168"), std::string::npos);
  }
  EXPECT_FALSE(std::filesystem::exists(up_table_path(o)));
  write_file_atomic(side, R"({"K": 3072, "kernel_source_hash": "old"})");
  EXPECT_THROW(run_tune(o, ev, quiet), InputError);
  o.force = true;
  EXPECT_NO_THROW(run_tune(o, ev, quiet));
  std::ifstream in(side);
  EXPECT_EQ(nlohmann::json::parse(in).at("K"), 3072);
  std::filesystem::remove_all(out);
}

TEST(Tuner, SpreadsBatchSizesOverSeveralEvaluators) {
  const auto out = temp_dir("pool");
  const TuneOptions o = options(out, {1, 2, 4, 8, 16, 32});
  SyntheticEvaluator a(informative(o)), b(informative(o));
  EvaluatorPool pool;
  pool.add(a);
  pool.add(b);
  struct Count : ProgressSink {
    std::set<int> workers;
    int finished = 0;
    void started_M(int, int, int, int worker) override { workers.insert(worker); }
    void finished_M(const MResult&) override { ++finished; }
  } progress;
  const TuneResult r = run_tune(o, pool, progress);
  EXPECT_GT(a.evaluations(), 0);
  EXPECT_GT(b.evaluations(), 0);
  EXPECT_EQ(progress.workers, (std::set<int>{0, 1}));
  EXPECT_EQ(progress.finished, 6);
  for (const MResult& row : r.rows) EXPECT_TRUE(row.reached) << row.M;
  std::filesystem::remove_all(out);
}

// Raises the stop flag (as the CLI's SIGINT handler does) when the first M finishes.
struct StopAfterFirstM : ProgressSink {
  std::atomic<bool>* stop;
  explicit StopAfterFirstM(std::atomic<bool>* s) : stop(s) {}
  void finished_M(const MResult&) override { *stop = true; }
};

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(Tuner, InterruptAfterTheFirstMWritesItsVerdictAndDefaultsTheRest) {
  const auto full_out = temp_dir("uninterrupted");
  const auto out = temp_dir("interrupted");
  SyntheticEvaluator full_ev(informative(options(full_out, {})));
  ProgressSink quiet;
  const TuneResult full = run_tune(options(full_out, {1, 8, 64}), full_ev, quiet);
  EXPECT_FALSE(full.interrupted);

  TuneOptions o = options(out, {1, 8, 64});
  o.provenance.argv = {"moetune", "tune", "--batch", "1,8,64", "--out", "/tmp/a b"};
  std::atomic<bool> stop{false};
  o.stop = &stop;
  SyntheticEvaluator ev(informative(o));
  StopAfterFirstM progress(&stop);
  const TuneResult r = run_tune(o, ev, progress);

  EXPECT_TRUE(r.interrupted);
  EXPECT_FALSE(r.budget_exhausted);
  EXPECT_EQ(r.resume_command, "moetune tune --batch 1,8,64 --out '/tmp/a b' --resume");
  // M=1 finished: the verdict and the table entries of a complete run.
  const MResult& first = r.rows.at(0);
  EXPECT_EQ(first.flag, "tuned");
  EXPECT_EQ(first.flag, full.rows.at(0).flag);
  EXPECT_EQ(r.up.at(1), full.up.at(1));
  EXPECT_EQ(r.down.at(1), full.down.at(1));
  EXPECT_NE(r.up.at(1), first.up.default_config);
  // M=8 and M=64 never started: the default, flagged.
  for (std::size_t i = 1; i < r.rows.size(); ++i) {
    const MResult& row = r.rows[i];
    EXPECT_EQ(row.flag, kInterruptedFlag) << row.M;
    EXPECT_FALSE(row.reached) << row.M;
    EXPECT_EQ(r.up.at(row.M), moetune_default_config(o.shape, o.gpu, row.M, false)) << row.M;
    EXPECT_EQ(r.down.at(row.M), row.down.default_config) << row.M;
  }
  // Every output is there, complete and parseable: the tables hold every M.
  EXPECT_EQ(read_config_table(r.up_table).entries.size(), 3u);
  EXPECT_EQ(read_config_table(r.down_table).entries.size(), 3u);
  for (const auto& side : {r.up_sidecar, r.down_sidecar}) {
    std::ifstream in(side);
    const nlohmann::json j = nlohmann::json::parse(in);
    EXPECT_EQ(j.at("entries").at("1").at("flag"), "tuned");
    EXPECT_EQ(j.at("entries").at("64").at("flag"), kInterruptedFlag);
  }
  const std::string md = read_text(r.report_md);
  EXPECT_NE(md.find("Interrupted"), std::string::npos);
  EXPECT_NE(md.find(r.resume_command), std::string::npos);
  EXPECT_NE(md.find(kInterruptedFlag), std::string::npos);
  EXPECT_NE(read_text(r.report_html).find("--resume"), std::string::npos);
  std::filesystem::remove_all(full_out);
  std::filesystem::remove_all(out);
}

TEST(Tuner, InterruptMidMAbandonsItAndCallsTheEvaluatorNoMore) {
  const auto out = temp_dir("midway");
  TuneOptions o = options(out, {8, 64});
  std::atomic<bool> stop{false};
  o.stop = &stop;
  SyntheticEvaluator ev(informative(o));
  // Up at M=8 is part way when the flag goes up (after its second chunk).
  struct StopMidway : ProgressSink {
    std::atomic<bool>* stop;
    SyntheticEvaluator* ev;
    long evaluations_at_stop = -1;
    void candidate_done(int, Stage, const KernelConfig&, const std::string&, int done,
                        int) override {
      if (done == 2 * kChunk && evaluations_at_stop < 0) {
        *stop = true;
        evaluations_at_stop = ev->evaluations();
      }
    }
    void finished_M(const MResult&) override { ADD_FAILURE() << "no M should finish"; }
  } progress;
  progress.stop = &stop;
  progress.ev = &ev;
  const TuneResult r = run_tune(o, ev, progress);
  ASSERT_GT(progress.evaluations_at_stop, 0);
  EXPECT_EQ(ev.evaluations(), progress.evaluations_at_stop);  // nothing started after the flag
  EXPECT_TRUE(r.interrupted);
  EXPECT_EQ(r.measurements, progress.evaluations_at_stop);   // counted, and in the log
  for (const MResult& row : r.rows) {
    EXPECT_EQ(row.flag, kInterruptedFlag) << row.M;
    EXPECT_EQ(r.up.at(row.M), row.up.default_config) << row.M;
  }
  EXPECT_EQ(RecordLog::read(r.log_path).records().size(),
            static_cast<std::size_t>(progress.evaluations_at_stop));
  std::filesystem::remove_all(out);
}

TEST(Tuner, ResumeAfterAnInterruptEndsAsAnUninterruptedRun) {
  const auto full_out = temp_dir("resume_full");
  const auto out = temp_dir("resume_cut");
  SyntheticEvaluator full_ev(informative(options(full_out, {})));
  ProgressSink quiet;
  const TuneResult full = run_tune(options(full_out, {1, 8, 64}), full_ev, quiet);

  TuneOptions o = options(out, {1, 8, 64});
  std::atomic<bool> stop{false};
  o.stop = &stop;
  {
    SyntheticEvaluator ev(informative(o));
    StopAfterFirstM progress(&stop);
    ASSERT_TRUE(run_tune(o, ev, progress).interrupted);
  }
  // Stopped again before anything runs: M=1 still finishes from the log alone.
  o.resume = true;
  {
    SyntheticEvaluator ev(informative(o));
    const TuneResult again = run_tune(o, ev, quiet);
    EXPECT_TRUE(again.interrupted);
    EXPECT_EQ(ev.evaluations(), 0);
    EXPECT_EQ(again.rows.at(0).flag, "tuned");
    EXPECT_EQ(again.up.at(1), full.up.at(1));
    EXPECT_EQ(again.rows.at(1).flag, kInterruptedFlag);
  }
  // --resume continues: M=1 from the log, the rest measured; the tables a complete run writes.
  stop = false;
  SyntheticEvaluator ev(informative(o));
  const TuneResult r = run_tune(o, ev, quiet);
  EXPECT_FALSE(r.interrupted);
  EXPECT_GT(r.resumed, 0);
  EXPECT_GT(r.measurements, 0);
  for (std::size_t i = 0; i < r.rows.size(); ++i) {
    EXPECT_EQ(r.rows[i].flag, full.rows[i].flag) << r.rows[i].M;
  }
  EXPECT_EQ(r.up, full.up);
  EXPECT_EQ(r.down, full.down);
  EXPECT_EQ(read_text(r.report_md).find("Interrupted"), std::string::npos);
  std::filesystem::remove_all(full_out);
  std::filesystem::remove_all(out);
}

// A SyntheticEvaluator with a hook after each evaluate(): it sees the call, the answers (which it
// may spoil) and the simulated clock before and after.
struct Hooked : Evaluator {
  SyntheticEvaluator inner;
  std::function<void(int M, Stage, const std::vector<KernelConfig>&, int replays,
                     std::vector<CandidateResult>&, double t0, double t1)>
      after;
  explicit Hooked(SyntheticOptions so) : inner(std::move(so)) {}
  std::vector<CandidateResult> evaluate(int M, Stage st, const std::vector<KernelConfig>& cs,
                                        int replays) override {
    const double t0 = inner.clock_s();
    auto r = inner.evaluate(M, st, cs, replays);
    if (after) after(M, st, cs, replays, r, t0, inner.clock_s());
    return r;
  }
  CheckResult check(int M, Stage st, const KernelConfig& c) override {
    return inner.check(M, st, c);
  }
  double clock_s() const override { return inner.clock_s(); }
};

// decide(): the winner's fresh confirmation run (max_replays, beside the default) times out. A
// config that just failed is not written on the strength of the search's own (biased) samples:
// the next ranked config is taken (and confirmed in its turn).
TEST(Tuner, AWinnerThatFailsItsConfirmationIsNotChosen) {
  const auto out = temp_dir("confirm_fails");
  const TuneOptions o = options(out, {64});
  Hooked ev(informative(o));
  const KernelConfig up_default = moetune_default_config(o.shape, o.gpu, 64, false);
  std::vector<KernelConfig> spoiled;
  ev.after = [&](int, Stage st, const std::vector<KernelConfig>& cs, int replays,
                 std::vector<CandidateResult>& r, double, double) {
    // The first of decide()'s confirmations: {winner, default} with max_replays.
    if (spoiled.empty() && st == Stage::up && cs.size() == 2 && cs[1] == up_default &&
        replays == o.max_replays) {
      r[0].status = CandidateStatus::timeout;
      r[0].reason = "worker timed out";
      r[0].times_s.clear();
      spoiled.push_back(cs[0]);
    }
  };
  ProgressSink quiet;
  const TuneResult res = run_tune(o, ev, quiet);
  const MResult& row = res.rows.at(0);
  ASSERT_EQ(spoiled.size(), 1u);
  EXPECT_NE(row.up.chosen, spoiled[0]);
  EXPECT_NE(res.up.at(64), spoiled[0]) << "flag " << row.flag;
  ASSERT_TRUE(row.up.winner.has_value());
  EXPECT_NE(*row.up.winner, spoiled[0]);  // the next ranked config
  EXPECT_EQ(row.up.failures.at("timeout"), 1);
  std::string notes;
  for (const auto& n : row.up.notes) notes += n + "; ";
  EXPECT_NE(notes.find(config_name(spoiled[0]) +
                       " failed its confirmation (timeout: worker timed out); next taken"),
            std::string::npos)
      << notes;
  std::filesystem::remove_all(out);
}

// The up default runs in round 1 but times out once later (failures stick): nothing judges a
// winner against it, so the M keeps both defaults, says why, is "kept default" (not "not
// reached": no budget cut it) and its down stage is not searched for a choice thrown away.
TEST(Tuner, AnUpDefaultThatFailsInTheSearchKeepsTheDefaultsAndSaysSo) {
  const auto out = temp_dir("default_fails");
  const TuneOptions o = options(out, {64});
  Hooked ev(informative(o));
  const KernelConfig up_default = moetune_default_config(o.shape, o.gpu, 64, false);
  int calls = 0;
  ev.after = [&](int, Stage st, const std::vector<KernelConfig>& cs, int,
                 std::vector<CandidateResult>& r, double, double) {
    if (st != Stage::up) return;
    for (std::size_t i = 0; i < cs.size(); ++i) {
      if (cs[i] == up_default && ++calls == 2) {
        r[i].status = CandidateStatus::timeout;
        r[i].reason = "worker timed out";
        r[i].times_s.clear();
      }
    }
  };
  ProgressSink quiet;
  const TuneResult res = run_tune(o, ev, quiet);
  const MResult& row = res.rows.at(0);
  ASSERT_GE(calls, 2);
  EXPECT_EQ(res.up.at(64), up_default);
  EXPECT_EQ(res.down.at(64), moetune_default_config(o.shape, o.gpu, 64, true));
  EXPECT_EQ(row.flag, "kept default");
  EXPECT_TRUE(row.reached);
  EXPECT_FALSE(res.budget_exhausted);
  EXPECT_EQ(row.down.measured, 0);  // not searched
  std::string notes;
  for (const auto& n : row.up.notes) notes += n + "; ";
  EXPECT_NE(notes.find("the default failed to run"), std::string::npos) << notes;
  EXPECT_NE(notes.find("the default kept"), std::string::npos) << notes;
  std::filesystem::remove_all(out);
}

// Fair share with two GPUs: 4 batch sizes, a budget that cuts every stage. The first two Ms start
// together, one on each GPU, and each gets the same share (budget x 2 GPUs / 4 Ms); counting
// only the queue and this M gave the second left x 2 / 3 (18% longer), squeezing the last.
TEST(Tuner, TwoGpusGiveTheFirstTwoMsTheSameShare) {
  const auto out = temp_dir("share");
  TuneOptions o = options(out, {64, 128, 256, 512});
  o.budget_s = 20;
  SyntheticOptions so;
  so.time_s = [](int, Stage, const KernelConfig&) { return 10e-6; };
  so.compile_s = 0.05;
  so.overhead_s = 0.05;
  std::map<int, std::pair<double, double>> spans;  // M -> its first and last evaluate()'s clock
  std::mutex mu;
  const auto record = [&](int M, Stage, const std::vector<KernelConfig>&, int,
                          std::vector<CandidateResult>&, double t0, double t1) {
    std::lock_guard<std::mutex> lock(mu);
    auto [it, fresh] = spans.try_emplace(M, t0, t1);
    if (!fresh) it->second.second = t1;
  };
  Hooked a(so), b(so);
  a.after = b.after = record;
  EvaluatorPool pool;
  pool.add(a);
  pool.add(b);
  ProgressSink quiet;
  run_tune(o, pool, quiet);
  const double first = spans.at(64).second - spans.at(64).first;
  const double second = spans.at(128).second - spans.at(128).first;
  EXPECT_NEAR(second / first, 1.0, 0.12) << "first " << first << " s, second " << second << " s";
  std::filesystem::remove_all(out);
}


// --resume under --budget: M=64 finished in the interrupted run, its stages cut by their budget
// share. Replayed records cost no clock, so the resumed run once went on measuring M=64 where the
// first run had stopped; the log's stop records now stop it at the same points: no evaluator call
// for M=64 and the same verdict.
TEST(Tuner, ResumeUnderABudgetReplaysAFinishedMWithoutTheEvaluator) {
  const auto out = temp_dir("resume_budget");
  TuneOptions o = options(out, {64, 128});
  o.budget_s = 60;  // 1 s per compile: up at M=64 gets 15 s, about two chunks
  std::atomic<bool> stop{false};
  o.stop = &stop;
  KernelConfig first_up, first_down;
  std::string first_flag;
  int first_up_measured = 0;
  {
    SyntheticEvaluator ev(informative(o));
    StopAfterFirstM progress(&stop);
    const TuneResult r = run_tune(o, ev, progress);
    ASSERT_TRUE(r.interrupted);
    first_up = r.up.at(64), first_down = r.down.at(64), first_flag = r.rows.at(0).flag;
    first_up_measured = r.rows.at(0).up.measured;
    long stops = 0;
    const RecordLog log = RecordLog::read(r.log_path);  // kept: the loop reads its records
    for (const LogRecord& rec : log.records()) stops += rec.kind == "stop";
    EXPECT_GE(stops, 1);  // the budget did cut M=64
  }
  stop = false;
  o.resume = true;
  Hooked ev(informative(o));
  long m64_calls = 0;
  ev.after = [&](int M, Stage, const std::vector<KernelConfig>& cs, int,
                 std::vector<CandidateResult>&, double, double) {
    if (M == 64) m64_calls += static_cast<long>(cs.size());
  };
  ProgressSink quiet;
  const TuneResult r = run_tune(o, ev, quiet);
  EXPECT_EQ(m64_calls, 0) << "M=64 measured again: up measured " << first_up_measured << " -> "
                          << r.rows.at(0).up.measured;
  EXPECT_EQ(r.rows.at(0).up.measured, first_up_measured);
  EXPECT_EQ(r.rows.at(0).flag, first_flag);
  EXPECT_EQ(r.up.at(64), first_up);
  EXPECT_EQ(r.down.at(64), first_down);
  std::filesystem::remove_all(out);
}

// Resuming a finished --budget run repeats it also where the budget reached no batch size: the
// "not reached" M has a stop record (after 0), so the resumed run, whose clock starts afresh,
// does not tune it (it did: 20 evaluations, flag "tuned").
TEST(Tuner, ResumeOfAFinishedBudgetRunRepeatsItsNotReachedMs) {
  const auto out = temp_dir("resume_unreached");
  TuneOptions o = options(out, {64, 128, 256, 512});
  o.budget_s = 10;
  std::vector<std::string> first;
  {
    SyntheticEvaluator ev(informative(o));
    ProgressSink quiet;
    const TuneResult r = run_tune(o, ev, quiet);
    ASSERT_TRUE(r.budget_exhausted);
    for (const MResult& row : r.rows) first.push_back(row.flag);
    ASSERT_EQ(first.at(1), "not reached");
  }
  o.resume = true;
  SyntheticEvaluator ev(informative(o));
  ProgressSink quiet;
  const TuneResult r = run_tune(o, ev, quiet);
  for (std::size_t i = 0; i < r.rows.size(); ++i)
    EXPECT_EQ(r.rows[i].flag, first[i]) << "M=" << r.rows[i].M;
  EXPECT_EQ(ev.evaluations(), 0) << "the resumed run measured again";
  std::filesystem::remove_all(out);
}

// --exhaustive under --budget shares the budget between batch sizes as the halving does: the
// first M no longer times configs until the sweep's deadline, leaving the next unreached.
TEST(Tuner, ExhaustiveUnderABudgetReachesEveryBatchSize) {
  const auto out = temp_dir("exhaustive_budget");
  TuneOptions o = options(out, {64, 128});
  o.exhaustive = true;
  o.budget_s = 120;  // 1 s per compile: thousands of configs do not fit, both Ms get a share
  SyntheticEvaluator ev(informative(o));
  ProgressSink quiet;
  const TuneResult r = run_tune(o, ev, quiet);
  ASSERT_EQ(r.rows.size(), 2u);
  for (const MResult& row : r.rows) {
    EXPECT_TRUE(row.reached) << row.M << " " << row.flag;
    EXPECT_GT(row.up.measured, 0) << row.M;
    EXPECT_GT(row.down.measured, 0) << row.M;
  }
  std::filesystem::remove_all(out);
}

// The default is twice as fast as every other config: decide() finds it first. It is kept, with no
// verdict against itself (the same samples "compared" read "within noise": best not
// significantly faster), and the row reads "kept default".
TEST(Tuner, ADefaultThatIsBestIsKeptNotWithinNoise) {
  const auto out = temp_dir("default_best");
  const TuneOptions o = options(out, {64});
  SyntheticOptions so = informative(o);
  const MoeShape shape = o.shape;
  const GpuSpec gpu = o.gpu;
  so.time_s = [shape, gpu](int M, Stage st, const KernelConfig& c) {
    KernelConfig d = moetune_default_config(shape, gpu, M, st == Stage::down);
    d.BLOCK_SIZE_M = moetune_default_config(shape, gpu, M, false).BLOCK_SIZE_M;
    return c == d ? 5e-6 : 10e-6;
  };
  SyntheticEvaluator ev(so);
  ProgressSink quiet;
  const TuneResult r = run_tune(o, ev, quiet);
  const MResult& row = r.rows.at(0);
  ASSERT_TRUE(row.up.winner.has_value());
  EXPECT_EQ(*row.up.winner, row.up.default_config);
  EXPECT_FALSE(row.up.winner_vs_default.has_value());
  EXPECT_EQ(row.flag, "kept default");
  std::filesystem::remove_all(out);
}

}  // namespace
}  // namespace moetune::tune
