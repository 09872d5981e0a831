// JSON views of the check / profile / bench results: see results_json.hpp.
#include "moe/results_json.hpp"

#include <cmath>

namespace moetune::moe {
namespace {

// NaN/inf are not JSON numbers: null.
nlohmann::json num(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

nlohmann::json summary_us(const Summary& s) {
  return {{"n", s.n},
          {"median_us", num(s.median_s * 1e6)},
          {"ci95_lo_us", num(s.ci95_lo_s * 1e6)},
          {"ci95_hi_us", num(s.ci95_hi_s * 1e6)},
          {"p10_us", num(s.p10_s * 1e6)},
          {"p90_us", num(s.p90_s * 1e6)},
          {"rel_stdev", num(s.rel_stdev)}};
}

nlohmann::json clock_json(const bench::ClockLog& c) {
  return {{"default_mhz", c.default_mhz},
          {"median_mhz", c.median_mhz},
          {"min_mhz", c.min_mhz},
          {"throttled", c.throttled}};
}

nlohmann::json comparison(const Comparison& c) {
  return {{"ratio", num(c.ratio)},
          {"ci95_lo", num(c.ci95_lo)},
          {"ci95_hi", num(c.ci95_hi)},
          {"verdict", to_string(c.verdict)}};
}

}  // namespace

nlohmann::json to_json(const CheckResult& r) {
  return {{"shape", r.shape},   {"dtype", r.dtype},         {"M", r.M},
          {"stage", r.stage},   {"config", r.config},       {"error", num(r.error)},
          {"threshold", r.threshold}, {"ok", r.ok},          {"detail", r.detail},
          {"rows", r.rows}};
}

nlohmann::json to_json(const CheckReport& r) {
  nlohmann::json results = nlohmann::json::array();
  for (const auto& x : r.results) results.push_back(to_json(x));
  return {{"seed", r.seed}, {"wall_s", r.wall_s}, {"failures", r.failures()}, {"results", results}};
}

nlohmann::json to_json(const ProfileRow& r) {
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& t : r.stages) {
    stages.push_back({{"stage", to_string(t.stage)},
                      {"runs", t.runs},
                      {"time", summary_us(t.time)},
                      {"bytes", t.bytes},
                      {"flops", t.flops},
                      {"floor_us", t.floor_s * 1e6},
                      {"floor_measured_us", t.floor_measured_s * 1e6},
                      {"pct_of_floor", num(t.pct_of_floor)}});
    if (!t.note.empty()) stages.back()["note"] = t.note;
  }
  return {{"M", r.M},
          {"up", moetune::to_json(r.up)},
          {"down", moetune::to_json(r.down)},
          {"stages", stages},
          {"dominant", to_string(r.dominant)},
          {"stages_sum_us", r.stages_sum_s * 1e6},
          {"layer", summary_us(r.layer)},
          {"rotation", r.rotation},
          {"clock", clock_json(r.clock)}};
}

nlohmann::json to_json(const LayerBenchRow& r) {
  return {{"M", r.M},
          {"up", moetune::to_json(r.up)},
          {"down", moetune::to_json(r.down)},
          {"mode", r.hot ? "hot" : "cold"},
          {"rotation", r.rotation},
          {"layer", summary_us(r.layer)},
          {"gemm_phase", summary_us(r.gemm_phase)},
          {"bytes", r.roofline.bytes},
          {"flops", r.roofline.flops},
          {"floor_us", r.roofline.floor_us},
          {"floor_measured_us", r.floor_measured_us},
          {"bound", r.roofline.bound},
          {"GBps", num(r.layer_GBps)},
          {"TFLOPs", num(r.layer_TFLOPs)},
          {"pct_floor", num(r.pct_floor)},
          {"pct_floor_measured", num(r.pct_floor_measured)},
          {"gemm_phase_pct_floor", num(r.gemm_phase_pct_floor)},
          {"clock", clock_json(r.clock)}};
}

nlohmann::json to_json(const LayerComparison& c) {
  return {{"M", c.M}, {"layer", comparison(c.layer)}, {"gemm_phase", comparison(c.gemm_phase)}};
}

}  // namespace moetune::moe
