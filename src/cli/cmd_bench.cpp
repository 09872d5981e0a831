// moetune bench [--config FILE] [--vs FILE2] [--hot] [--no-pdl] [--no-decode-kernels]
// [--persistent]: per-M latency of the layer and the GEMM phase with 95% CI, GB/s, TFLOP/s and %
// of the floor; --vs says faster / slower / within noise; --no-pdl launches the stages without
// programmatic dependent launch, --no-decode-kernels runs the stage kernels at M <= 4 too,
// --persistent both block-fp8 GEMMs in one persistent kernel at M <= 32 on sm_90a (A/Bs).
#include <algorithm>
#include <string>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/gpu_run.hpp"
#include "cli/shape_json.hpp"
#include "moe/decode.hpp"
#include "moetune/fused_moe.hpp"

namespace moetune::cli {
namespace {

struct BenchCliOptions {
  ConfigCliOption config, vs;
  MeasureCliOptions measure;
};

std::vector<moe::LayerBenchRow> bench_tables(const Target& t, const Tables& tables,
                                             const moe::BenchOptions& opts,
                                             const FusedMoeOptions& fo) {
  FusedMoe moe(t.shape, t.gpu, tables.up, tables.down, fo);
  std::int64_t max_M = 1;
  for (std::int64_t M : opts.batch) max_M = std::max(max_M, M);
  moe.prepare(max_M);
  return moe::layer_bench(moe, t.gpu, opts);
}

nlohmann::ordered_json summary_json(const Summary& s) {
  return {{"median_us", s.median_s * 1e6},   {"ci95_lo_us", s.ci95_lo_s * 1e6},
          {"ci95_hi_us", s.ci95_hi_s * 1e6}, {"p10_us", s.p10_s * 1e6},
          {"p90_us", s.p90_s * 1e6},         {"n", s.n}};
}

nlohmann::ordered_json rows_json(const std::vector<moe::LayerBenchRow>& rows) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const moe::LayerBenchRow& r : rows) {
    nlohmann::ordered_json j{{"M", r.M},
                             {"mode", r.hot ? "hot" : "cold"},
                             {"rotation", r.rotation},
                             {"layer_kernels", r.layer_kernels},
                             {"layer", summary_json(r.layer)},
                             {"gemm_phase", summary_json(r.gemm_phase)},
                             {"floor_us", r.roofline.floor_us},
                             {"bound", r.roofline.bound},
                             {"pct_floor", r.pct_floor},
                             {"gemm_phase_pct_floor", r.gemm_phase_pct_floor},
                             {"GBps", r.layer_GBps},
                             {"TFLOPs", r.layer_TFLOPs},
                             {"clock_median_mhz", r.clock.median_mhz},
                             {"throttled", r.clock.throttled}};
    if (r.floor_measured_us > 0) {
      j["floor_measured_us"] = r.floor_measured_us;
      j["pct_floor_measured"] = r.pct_floor_measured;
    }
    out.push_back(j);
  }
  return out;
}

void print_rows(const std::string& label, const std::vector<moe::LayerBenchRow>& rows) {
  fmt::print("{}:\n", label);
  fmt::print("{:>6}  {:>10}  {:>21}  {:>10}  {:>8}  {:>8}  {:>9}  {:>7}  {}\n", "M", "layer_us",
             "95% CI", "gemm_us", "GB/s", "TFLOP/s", "floor_us", "%floor", "kernels");
  for (const moe::LayerBenchRow& r : rows) {
    std::string line = fmt::format(
        "{:>6}  {:>10.2f}  [{:>8.2f}, {:>8.2f}]  {:>10.2f}  {:>8.0f}  {:>8.1f}  {:>9.2f}  "
        "{:>6.1f}%  {:<10}{}{}",
        r.M, r.layer.median_s * 1e6, r.layer.ci95_lo_s * 1e6, r.layer.ci95_hi_s * 1e6,
        r.gemm_phase.median_s * 1e6, r.layer_GBps, r.layer_TFLOPs, r.roofline.floor_us, r.pct_floor,
        r.layer_kernels,
        r.floor_measured_us > 0 ? fmt::format("  ({:.1f}% of measured)", r.pct_floor_measured) : "",
        r.clock.throttled > 0 ? fmt::format("  [{} throttled samples]", r.clock.throttled) : "");
    while (!line.empty() && line.back() == ' ') line.pop_back();  // the kernels column's padding
    fmt::print("{}\n", line);
  }
}

int run_bench(const GlobalOptions& g, const BenchCliOptions& o) {
  moe::BenchOptions opts = bench_options(o.measure);  // parses --batch before any GPU work
  const FusedMoeOptions fo = fused_moe_options(o.measure);  // and the layer's flags
  Tables a = tables_of(o.config);
  std::optional<Tables> b;
  if (given(o.vs.opt)) b = read_tables(o.vs.file, "vs");
  Target t = resolve_local_target(g, opts.batch);
  add_measured_ceilings(o.measure, opts);
  const bool pdl = fo.pdl && arch_supports_pdl(t.gpu.arch());  // what FusedMoe will do
  // The stage path's GEMM2 adds the top-k sum (FusedMoe::gemm2_sums_topk, persistent aside).
  const bool topk_in_gemm2 = fo.topk_sum_in_gemm2 && gemm2_sums_topk_applies(1, t.gpu.arch());

  std::vector<moe::LayerBenchRow> rows_a = bench_tables(t, a, opts, fo);
  std::vector<moe::LayerBenchRow> rows_b;
  std::vector<moe::LayerComparison> cmp;
  if (b) {
    rows_b = bench_tables(t, *b, opts, fo);
    cmp = moe::compare(rows_a, rows_b);
  }

  if (g.json) {
    nlohmann::ordered_json j{{"gpu", t.gpu.name},
                             {"shape", shape_json(t.shape, t.gpu)},
                             {"config", a.label},
                             {"pdl", pdl},
                             {"topk_sum_in_gemm2", topk_in_gemm2},
                             {"alignment_in_gemm1",
                              fo.alignment_in_gemm1 ? nlohmann::ordered_json(*fo.alignment_in_gemm1)
                                                    : nlohmann::ordered_json("default")},
                             {"decode_kernels_max_M",
                              fo.decode_kernels && decode_kernels_apply(t.shape, 1)
                                  ? moe::decode_max_tokens(t.shape)
                                  : std::int64_t{0}},
                             {"rows", rows_json(rows_a)}};
    if (b) {
      j["vs"] = b->label;
      j["vs_rows"] = rows_json(rows_b);
      nlohmann::ordered_json c = nlohmann::ordered_json::array();
      for (const moe::LayerComparison& x : cmp) {
        c.push_back({{"M", x.M},
                     {"verdict", to_string(x.layer.verdict)},
                     {"ratio", x.layer.ratio},
                     {"ci95", {x.layer.ci95_lo, x.layer.ci95_hi}},
                     {"gemm_phase_verdict", to_string(x.gemm_phase.verdict)},
                     {"gemm_phase_ratio", x.gemm_phase.ratio}});
      }
      j["comparison"] = c;
    }
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("{} on {} ({}, {}{})\n", shape_title(t.shape), t.gpu.name,
             opts.hot ? "hot: cache-resident" : "cold: rotating routing sets",
             pdl ? "PDL" : "no PDL", topk_in_gemm2 ? ", top-k sum in GEMM2" : "");
  print_rows(a.label, rows_a);
  if (fo.decode_kernels &&
      std::any_of(rows_a.begin(), rows_a.end(),
                  [&](const moe::LayerBenchRow& r) { return decode_kernels_apply(t.shape, r.M); }))
    fmt::print("(M <= {}: the layer runs the two decode kernels, --no-decode-kernels the stage "
               "kernels; gemm_us is the stage kernels' GEMM phase)\n",
               moe::decode_max_tokens(t.shape));
  // The sliced kernel has its own tiles (it runs where the table's up BLOCK_SIZE_M is 16): two
  // tables time alike there, so say so rather than leave "within noise" unexplained.
  const auto sliced = [](const std::vector<moe::LayerBenchRow>& rows) {
    return std::any_of(rows.begin(), rows.end(),
                       [](const moe::LayerBenchRow& r) { return r.layer_kernels == "sliced"; });
  };
  if (sliced(rows_a) || (b && sliced(rows_b)))
    fmt::print("(kernels \"sliced\": one kernel runs both GEMMs with its own tiles, where the "
               "table's up BLOCK_SIZE_M is 16; --no-sliced runs the stage kernels)\n");
  if (b) {
    print_rows(b->label, rows_b);
    fmt::print("{} vs {} (95% CI of the ratio of medians):\n", a.label, b->label);
    for (const moe::LayerComparison& x : cmp) {
      fmt::print("{:>6}  {:<12}  ratio {:.3f} [{:.3f}, {:.3f}]  (GEMM phase: {}, {:.3f})\n", x.M,
                 to_string(x.layer.verdict), x.layer.ratio, x.layer.ci95_lo, x.layer.ci95_hi,
                 to_string(x.gemm_phase.verdict), x.gemm_phase.ratio);
    }
  }
  return 0;
}

}  // namespace

Commands register_bench(CLI::App& app, const GlobalOptions& g) {
  auto o = std::make_shared<BenchCliOptions>();
  return tables_command(
      app, "bench",
      "per-M latency with 95% CI, GB/s, TFLOP/s, % of floor; --vs: faster / slower / "
      "within noise",
      o->config,
      "config table (default: moetune's defaults); its _down sibling is used when present",
      &o->vs, o->measure, [&g, o] { return run_bench(g, *o); });
}

}  // namespace moetune::cli
