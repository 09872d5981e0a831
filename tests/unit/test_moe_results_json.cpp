// JSON views of check / bench results (src/moe/results_json.cpp).
#include "moe/results_json.hpp"

#include <cmath>

#include <gtest/gtest.h>

namespace moetune::moe {
namespace {

TEST(MoeResultsJson, CheckReportCountsFailuresAndNullsNaN) {
  CheckReport rep;
  rep.seed = 42;
  CheckResult ok;
  ok.shape = "deepseek-v3 tp8";
  ok.dtype = "fp8_block";
  ok.M = 40000;
  ok.stage = "layer";
  ok.error = 0.0195;
  ok.threshold = 0.05;
  ok.ok = true;
  ok.rows = 256;
  CheckResult bad = ok;
  bad.stage = "gemm2";
  bad.error = NAN;
  bad.ok = false;
  bad.detail = "output holds NaN or inf";
  rep.results = {ok, bad};
  const auto j = to_json(rep);
  EXPECT_EQ(j["seed"], 42);
  EXPECT_EQ(j["failures"], 1);
  EXPECT_DOUBLE_EQ(j["results"][0]["error"].get<double>(), 0.0195);
  EXPECT_TRUE(j["results"][1]["error"].is_null());
  EXPECT_EQ(j["results"][1]["stage"], "gemm2");
  EXPECT_EQ(j["results"][0]["M"], 40000);
}

TEST(MoeResultsJson, BenchRowInMicroseconds) {
  LayerBenchRow r;
  r.M = 64;
  r.layer.median_s = 250e-6;
  r.layer.ci95_lo_s = 249e-6;
  r.gemm_phase.median_s = 230e-6;
  r.roofline.floor_us = 255.6;
  r.roofline.bound = "memory";
  r.pct_floor = 102.2;
  const auto j = to_json(r);
  EXPECT_NEAR(j["layer"]["median_us"].get<double>(), 250.0, 1e-9);
  EXPECT_NEAR(j["gemm_phase"]["median_us"].get<double>(), 230.0, 1e-9);
  EXPECT_EQ(j["mode"], "cold");
  EXPECT_EQ(j["bound"], "memory");
  LayerComparison c;
  c.M = 64;
  c.layer.verdict = Verdict::faster;
  EXPECT_EQ(to_json(c)["layer"]["verdict"], "faster");
}

}  // namespace
}  // namespace moetune::moe
