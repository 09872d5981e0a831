// moetune profile: per-stage time (routing, align, quant, GEMM1, act, GEMM2, reduce) against each
// stage's own floor, and which stage dominates.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/gpu_run.hpp"
#include "cli/shape_json.hpp"
#include "moetune/fused_moe.hpp"

namespace moetune::cli {
namespace {

struct ProfileCliOptions {
  ConfigCliOption config;
  MeasureCliOptions measure;
};

int run_profile(const GlobalOptions& g, const ProfileCliOptions& o) {
  moe::BenchOptions opts = bench_options(o.measure);
  const FusedMoeOptions fo = fused_moe_options(o.measure);  // its flags before any GPU work
  Tables tables = tables_of(o.config);
  Target t = resolve_local_target(g, opts.batch);
  add_measured_ceilings(o.measure, opts);
  FusedMoe moe(t.shape, t.gpu, tables.up, tables.down, fo);
  std::int64_t max_M = 1;
  for (std::int64_t M : opts.batch) max_M = std::max(max_M, M);
  moe.prepare(max_M);
  std::vector<moe::ProfileRow> rows = moe::profile(moe, t.gpu, opts);

  if (g.json) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const moe::ProfileRow& r : rows) {
      nlohmann::ordered_json stages = nlohmann::ordered_json::array();
      for (const moe::StageTiming& s : r.stages) {
        nlohmann::ordered_json j{{"stage", to_string(s.stage)},
                                 {"runs", s.runs},
                                 {"median_us", s.time.median_s * 1e6},
                                 {"ci95_lo_us", s.time.ci95_lo_s * 1e6},
                                 {"ci95_hi_us", s.time.ci95_hi_s * 1e6},
                                 {"bytes", s.bytes},
                                 {"flops", s.flops},
                                 {"floor_us", s.floor_s * 1e6},
                                 {"pct_floor", s.pct_of_floor}};
        if (s.floor_measured_s > 0) j["floor_measured_us"] = s.floor_measured_s * 1e6;
        if (!s.note.empty()) j["note"] = s.note;
        stages.push_back(j);
      }
      out.push_back({{"M", r.M},
                     {"dominant", to_string(r.dominant)},
                     {"stages_sum_us", r.stages_sum_s * 1e6},
                     {"layer_us", r.layer.median_s * 1e6},
                     {"layer_kernels", r.layer_kernels},
                     {"stages", stages}});
    }
    nlohmann::ordered_json j{{"gpu", t.gpu.name},
                             {"shape", shape_json(t.shape, t.gpu)},
                             {"config", tables.label},
                             {"pdl", moe.pdl()},
                             {"rows", out}};
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("{} on {} ({}, config: {}, {})\n", shape_title(t.shape), t.gpu.name,
             opts.hot ? "hot" : "cold", tables.label, moe.pdl() ? "PDL" : "no PDL");
  for (const moe::ProfileRow& r : rows) {
    auto name = [&](MoeStage st) {
      return stage_name(st, t.shape, r.M, r.up, r.sums_topk, r.gemm1_aligns);
    };
    fmt::print("\nM={}: layer {:.2f} us{}, stages sum {:.2f} us, dominant {}\n", r.M,
               r.layer.median_s * 1e6,
               r.layer_kernels == "decode"
                   ? " (the two decode kernels; the stages below are the stage kernels')"
                   : "",
               r.stages_sum_s * 1e6, name(r.dominant));
    fmt::print("  {:<18}  {:>10}  {:>10}  {:>7}  {:>7}\n", "stage", "time_us", "floor_us", "%floor",
               "share");
    for (const moe::StageTiming& s : r.stages) {
      if (!s.runs) {
        fmt::print("  {:<18}  {:>10}\n", name(s.stage), "-");
        continue;
      }
      fmt::print("  {:<18}  {:>10.2f}  {:>10.2f}  {:>6.1f}%  {:>6.1f}%\n", name(s.stage),
                 s.time.median_s * 1e6, s.floor_s * 1e6, s.pct_of_floor,
                 r.stages_sum_s > 0 ? 100 * s.time.median_s / r.stages_sum_s : 0.0);
    }
  }
  return 0;
}

}  // namespace

Commands register_profile(CLI::App& app, const GlobalOptions& g) {
  auto o = std::make_shared<ProfileCliOptions>();
  return tables_command(
      app, "profile",
      "per-stage time (routing, align, quant, GEMM1, act, GEMM2, reduce) against each "
      "stage's floor",
      o->config, "config table (default: moetune's defaults)", nullptr, o->measure,
      [&g, o] { return run_profile(g, *o); });
}

}  // namespace moetune::cli
