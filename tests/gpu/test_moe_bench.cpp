// Whole-layer / GEMM-phase bench and per-stage profile on the GPU (src/moe/layer_bench.cpp,
// profile.cpp): sane numbers, printed as a table (bench/results/*_h200_moe.md records them).
// MOETUNE_BENCH_BATCH="1,8,..." and MOETUNE_BENCH_DTYPES="bf16,fp8_block" pick the points.
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include <gtest/gtest.h>

#include "cuda/context.hpp"
#include "cuda/driver.hpp"
#include "moe/check.hpp"
#include "moe/profile.hpp"

#include "test_moe_common.hpp"

namespace moetune::moe {
namespace {

std::vector<std::string> split(const char* env, const char* fallback) {
  std::vector<std::string> v;
  std::stringstream ss(env ? env : fallback);
  for (std::string t; std::getline(ss, t, ',');) v.push_back(t);
  return v;
}

using moetune::moe::testing::local_gpu;

class MoeBenchGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda::gpu_available(&why)) GTEST_SKIP() << why;
    cuda::Context::get(0);
  }
  BenchOptions options() const {
    BenchOptions o;
    o.batch.clear();
    for (const auto& b : split(std::getenv("MOETUNE_BENCH_BATCH"), "1,8,64,256,1024,4096"))
      o.batch.push_back(std::stoll(b));
    o.measure.max_time_s = 1.0;
    o.measure.max_replays = 60;
    return o;
  }
};

TEST_F(MoeBenchGpu, LayerAndGemmPhaseCold) {
  const BenchOptions o = options();
  for (const auto& cs : anchor_check_shapes()) {
    if (cs.name.find("mixtral") != std::string::npos) continue;
    for (const auto& dt : split(std::getenv("MOETUNE_BENCH_DTYPES"), "bf16,fp8_block")) {
      if (cs.name.find("deepseek") != std::string::npos && dt != "fp8_block") continue;
      FusedMoe moe(with_dtype_variant(cs.shape, dt), local_gpu());
      moe.prepare(*std::max_element(o.batch.begin(), o.batch.end()));
      const auto rows = layer_bench(moe, local_gpu(), o);
      ASSERT_EQ(rows.size(), o.batch.size());
      std::printf("| shape | M | layer us (95%% CI) | GEMM phase us (95%% CI) | floor us | %% floor "
                  "(layer) | %% floor (GEMM phase) | GB/s | TFLOP/s | rot | clock MHz |\n");
      for (const auto& r : rows) {
        EXPECT_GT(r.layer.median_s, 0);
        EXPECT_GT(r.gemm_phase.median_s, 0);
        EXPECT_LT(r.gemm_phase.median_s, r.layer.median_s * 1.05);
        EXPECT_GT(r.roofline.floor_us, 0);
        EXPECT_LT(r.pct_floor, 150.0);  // no faster than the floor (plus L2 help)
        EXPECT_EQ(r.clock.throttled, 0) << "samples below 75% of the default SM clock";
        std::printf("| %s %s | %lld | %.1f (%.1f-%.1f) | %.1f (%.1f-%.1f) | %.1f | %.0f%% | %.0f%% | %.0f "
                    "| %.1f | %d | %.0f |\n",
                    cs.name.c_str(), dt.c_str(), static_cast<long long>(r.M), r.layer.median_s * 1e6,
                    r.layer.ci95_lo_s * 1e6, r.layer.ci95_hi_s * 1e6, r.gemm_phase.median_s * 1e6,
                    r.gemm_phase.ci95_lo_s * 1e6, r.gemm_phase.ci95_hi_s * 1e6, r.roofline.floor_us,
                    r.pct_floor, r.gemm_phase_pct_floor, r.layer_GBps, r.layer_TFLOPs, r.rotation,
                    r.clock.median_mhz);
      }
      std::fflush(stdout);
      // compare() against itself: within noise.
      for (const auto& c : compare(rows, rows)) EXPECT_EQ(c.layer.verdict, Verdict::within_noise);
    }
  }
}

TEST_F(MoeBenchGpu, StageProfile) {
  BenchOptions o = options();
  o.batch = {1, 64, 4096};
  const auto cs = anchor_check_shapes()[1];  // deepseek-v3 tp8
  FusedMoe moe(with_dtype_variant(cs.shape, "fp8_block"), local_gpu());
  moe.prepare(4096);
  const auto rows = profile(moe, local_gpu(), o);
  std::printf("| %s fp8_block M | routing | align | quant | gemm1 | act | gemm2 | reduce | sum | "
              "layer | dominant |\n", cs.name.c_str());
  for (const auto& r : rows) {
    ASSERT_EQ(r.stages.size(), 7u);
    std::printf("| %lld ", static_cast<long long>(r.M));
    for (const auto& t : r.stages) {
      EXPECT_TRUE(t.runs);
      EXPECT_GT(t.time.median_s, 0) << to_string(t.stage);
      EXPECT_GT(t.floor_s, 0) << to_string(t.stage);
      std::printf("| %.1f (%.0f%%) ", t.time.median_s * 1e6, t.pct_of_floor);
    }
    std::printf("| %.1f | %.1f | %s |\n", r.stages_sum_s * 1e6, r.layer.median_s * 1e6,
                to_string(r.dominant));
  }
}

}  // namespace
}  // namespace moetune::moe
