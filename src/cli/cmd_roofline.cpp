// moetune roofline: per batch size, the hardware floor of one MoE layer call (DESIGN.md).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/ceilings.hpp"
#include "cli/commands.hpp"
#include "cli/shape_json.hpp"
#include "moetune/config.hpp"
#include "moetune/error.hpp"
#include "moetune/tuner.hpp"
#include "moetune/roofline.hpp"

namespace moetune::cli {
namespace {

struct RooflineOptions {
  std::string batch, measured;
  const CLI::Option* batch_opt = nullptr;
  const CLI::Option* measured_opt = nullptr;
  bool measured_ceilings = false;
};

// The JSON's numbers are rounded where they are written, never in the computation (the table,
// crossover_M and bound use the exact values): the (1 - topk/E)^M sum leaves noise such as
// 7.999999999999999 experts. Counts (bytes, FLOPs, B/s, FLOP/s) become JSON integers; the rest
// (expected experts, times in us) keep 4 decimals.
// A count as a JSON integer while a double holds it exactly (below 2^53, which every preset at
// any --batch stays under); past that (overridden sizes of 10^6 and more) the double itself.
nlohmann::ordered_json whole(double v) {
  constexpr double kExact = 9007199254740992.0;  // 2^53
  if (std::isfinite(v) && std::fabs(v) < kExact) return std::llround(v);
  return v;
}
double four_decimals(double v) {
  // The double nearest the 4-decimal value: nlohmann-json prints it so (3.9357, 8.0).
  return std::round(v * 1e4) / 1e4;
}

int run_roofline(const GlobalOptions& g, const RooflineOptions& o) {
  const std::map<int, double> measured =
      given(o.measured_opt) ? tune::parse_measured_times(o.measured) : std::map<int, double>{};
  std::vector<int> batch =
      given(o.batch_opt) ? tune::parse_batch_list(o.batch) : default_batch_sizes();
  if (!given(o.batch_opt) && !measured.empty()) {  // the measured Ms are the batch
    batch.clear();
    for (const auto& [M, us] : measured) batch.push_back(M);
  }
  for (const auto& [M, us] : measured)
    if (!std::binary_search(batch.begin(), batch.end(), M))
      throw InputError("measured", o.measured, fmt::format("M = {} is not in --batch", M));
  // Measured ceilings are this GPU's (exit 3 without one); the roofline models any shape, also
  // one moetune's kernels cannot run (no require_runnable here, unlike resolve_local_target).
  MoeShape shape = resolve_shape(g);
  GpuSpec gpu = o.measured_ceilings ? resolve_local_gpu(g) : resolve_gpu(g);
  check_dtype_on_gpu(shape, gpu);
  const Target t{std::move(shape), std::move(gpu)};
  tune::check_token_slots(batch, t.shape.topk);
  const Ceilings c = o.measured_ceilings ? bench::measure_ceilings(0).for_dtype(t.shape.dtype)
                                         : spec_ceilings(t.shape, t.gpu);  // checks the peak
  std::vector<RooflineRow> rows = roofline(t.shape, c, batch);
  int crossover = crossover_M(t.shape, c);

  if (g.json) {
    nlohmann::ordered_json j;
    j["gpu"] = t.gpu.name;
    if (o.measured_ceilings) {
      j["ceilings"] = {{"source", "measured"},
                       {"bandwidth_Bps", whole(c.bandwidth_Bps)},
                       {"peak_flops", whole(c.peak_flops)}};
    }
    j["crossover_M"] = crossover;
    j["rows"] = nlohmann::ordered_json::array();
    for (const RooflineRow& r : rows) {
      j["rows"].push_back(
          nlohmann::ordered_json{{"M", r.M},
                                 {"expected_experts", four_decimals(r.expected_experts)},
                                 {"bytes", whole(r.bytes)},
                                 {"flops", whole(r.flops)},
                                 {"t_mem_us", four_decimals(r.t_mem_us)},
                                 {"t_compute_us", four_decimals(r.t_compute_us)},
                                 {"floor_us", four_decimals(r.floor_us)},
                                 {"bound", r.bound}});
      if (const auto it = measured.find(r.M); it != measured.end()) {
        j["rows"].back()["measured_us"] = it->second;
        j["rows"].back()["pct_floor"] = four_decimals(100.0 * r.floor_us / it->second);
      }
    }
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("{}: E={} N={} K={} topk={} {} on {}\n", shape_title(t.shape), t.shape.E, t.shape.N,
             t.shape.K, t.shape.topk, to_string(t.shape.dtype), t.gpu.name);
  fmt::print(
      "ceilings: {:.2f} TB/s, {:.1f} TFLOP/s dense {} ({})\n", c.bandwidth_Bps / 1e12,
      c.peak_flops / 1e12, to_string(t.shape.dtype),
      o.measured_ceilings ? "measured on this GPU: copy bandwidth, mma.sync peak" : "spec sheet");
  // Columns widen with the largest M (up to 2^24 tokens), as tune's plan does.
  std::size_t wm = 6, wf = 10;
  for (const RooflineRow& r : rows) {
    wm = std::max(wm, std::to_string(r.M).size());
    wf = std::max(wf, fmt::format("{:.3f}", r.flops / 1e9).size());
  }
  fmt::print("{:>{}}  {:>8}  {:>10}  {:>{}}  {:>9}  {:>9}  {:>9}  {}\n", "M", wm, "experts", "MB",
             "GFLOP", wf, "t_mem_us", "t_comp_us", "floor_us",
             measured.empty() ? "bound"
                              : fmt::format("{:<7}  {:>11}  {:>7}", "bound", "measured_us", "%floor"));
  for (const RooflineRow& r : rows) {
    std::string m;
    if (const auto it = measured.find(r.M); it != measured.end()) {
      m = fmt::format("  {:>11.2f}  {:>6.1f}%", it->second, 100.0 * r.floor_us / it->second);
    } else if (!measured.empty()) {
      m = fmt::format("  {:>11}  {:>7}", "-", "-");
    }
    const std::string bound = measured.empty() ? r.bound : fmt::format("{:<7}", r.bound);
    fmt::print("{:>{}}  {:>8.2f}  {:>10.2f}  {:>{}.3f}  {:>9.2f}  {:>9.2f}  {:>9.2f}  {}{}\n", r.M,
               wm, r.expected_experts, r.bytes / 1e6, r.flops / 1e9, wf, r.t_mem_us,
               r.t_compute_us, r.floor_us, bound, m);
  }
  if (crossover > 0) {
    fmt::print("compute-bound from M = {}\n", crossover);
  } else {
    fmt::print("memory-bound at every M\n");
  }
  return 0;
}

}  // namespace

Commands register_roofline(CLI::App& app, const GlobalOptions& g) {
  auto o = std::make_shared<RooflineOptions>();
  CLI::App* sub = app.add_subcommand(
      "roofline", "per M: expected active experts, bytes, FLOPs, t_mem, t_compute, floor, bound");
  o->batch_opt = sub->add_option("--batch", o->batch,
                                 "batch sizes M, e.g. 1,8,64 (default: the common 18, 1 to 4096)");
  o->measured_opt =
      sub->add_option("--measured", o->measured,
                      "layer times measured elsewhere, µs per M, e.g. 8=46.7,64=111.5: each set "
                      "against its floor (%floor); without --batch they are the batch")
          ->type_name("M=US,...");
  sub->add_flag("--measured-ceilings", o->measured_ceilings,
                "the floor over this GPU's measured copy bandwidth and MMA rate (needs the GPU)");
  return {{sub, [&g, o] { return run_roofline(g, *o); }}};
}

}  // namespace moetune::cli
