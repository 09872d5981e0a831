// A tiny real sweep on the GPU: the default model (qwen3.5-122b-a10b-fp8 at TP4) at M = 1 and
// 64 with a 60 s budget, through GpuEvaluator and `moetune worker` processes (the binary: env
// MOETUNE_BIN, else `moetune` beside this test, else the build tree's src/cli/moetune). Checks
// that tables, sidecars, log and report are written, that the reached rows hold real times, and
// that every measured winner passes the fp64 check again on fresh inputs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "moetune/gpu_spec.hpp"
#include "moetune/model.hpp"
#include "cuda/driver.hpp"
#include "moetune/tuner.hpp"
#include "tune/evaluator.hpp"
#include "tune/gpu_evaluator.hpp"

namespace moetune::tune {
namespace {

namespace fs = std::filesystem;

std::string worker_binary() {
  if (const char* env = std::getenv("MOETUNE_BIN"); env != nullptr && *env != '\0') return env;
  const fs::path self = fs::read_symlink("/proc/self/exe");
  for (const fs::path& p : {self.parent_path() / "moetune",
                            self.parent_path().parent_path().parent_path() / "src/cli/moetune"}) {
    if (fs::exists(p)) return p.string();
  }
  return "";
}

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

TEST(TuneGpu, TinySweepWritesTablesSidecarsReportAndCheckedWinners) {
  std::string why;
  if (!cuda::gpu_available(&why)) GTEST_SKIP() << why;
  const std::string bin = worker_binary();
  ASSERT_FALSE(bin.empty()) << "set MOETUNE_BIN to the moetune binary";
  ModelOptions mo;
  mo.tp = kDefaultTp;
  const MoeShape shape = load_model(kDefaultPreset, mo);

  GpuEvaluatorOptions eo;
  eo.seed = 1;
  EvaluatorPool pool = make_gpu_pool(shape, 1, {bin, "worker"}, eo);
  auto& ev = dynamic_cast<GpuEvaluator&>(pool.at(0));
  const nlohmann::json device = ev.device();
  ASSERT_TRUE(device.contains("name")) << device.dump();
  EXPECT_GT(device.value("sms", 0), 0);
  EXPECT_FALSE(device.value("kernel_source_hash", std::string()).empty());
  const GpuSpec* gpu = find_gpu(device.at("name").get<std::string>());
  ASSERT_NE(gpu, nullptr) << device.dump();

  const fs::path out = fs::temp_directory_path() / ("moetune_tune_gpu_" + std::to_string(getpid()));
  fs::remove_all(out);
  TuneOptions t;
  t.shape = shape;
  t.gpu = *gpu;
  t.batch = {1, 64};
  t.budget_s = 60;
  t.out_dir = out;
  t.seed = 1;
  t.provenance.device_name = device.at("name").get<std::string>();
  t.provenance.kernel_source_hash = device.value("kernel_source_hash", std::string());
  t.provenance.nvrtc_version = device.value("nvrtc", std::string());
  NullProgress progress;
  const TuneResult r = run_tune(t, pool, progress);

  for (const fs::path& p : {r.up_table, r.down_table, r.up_sidecar, r.down_sidecar, r.log_path,
                            r.report_md, r.report_html}) {
    EXPECT_TRUE(fs::exists(p) && fs::file_size(p) > 0) << p;
  }
  const nlohmann::json up = read_json(r.up_table), down = read_json(r.down_table);
  EXPECT_TRUE(up.contains("1") && up.contains("64")) << up.dump();
  EXPECT_TRUE(down.contains("1") && down.contains("64")) << down.dump();
  EXPECT_GT(r.measurements, 0);

  ASSERT_EQ(r.rows.size(), 2u);
  int reached = 0;
  for (const MResult& row : r.rows) {
    if (!row.reached) continue;
    ++reached;
    EXPECT_GT(row.default_total.median_s, 0) << "M=" << row.M;
    EXPECT_LT(row.default_total.median_s, 1e-2) << "M=" << row.M;  // one layer's GEMMs
    EXPECT_GT(row.floor.floor_us, 0) << "M=" << row.M;
    for (const auto& [stage, outcome] : {std::pair{Stage::up, &row.up}, {Stage::down, &row.down}}) {
      EXPECT_EQ(outcome->failures.count("wrong_result"), 0u)
          << "M=" << row.M << " " << to_string(stage);
      if (!outcome->winner) continue;
      const CheckResult c = ev.check(row.M, stage, *outcome->winner);
      EXPECT_TRUE(c.ok) << "M=" << row.M << " " << to_string(stage) << ": " << c.reason;
      EXPECT_LT(c.rel_error, 5e-2) << "M=" << row.M << " " << to_string(stage);
    }
  }
  EXPECT_GE(reached, 1);
  EXPECT_EQ(ev.restarts(), 0) << "a worker was lost during the sweep";
  fs::remove_all(out);
}

}  // namespace
}  // namespace moetune::tune
