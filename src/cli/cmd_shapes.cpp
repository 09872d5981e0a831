// moetune shapes: the MoE layer shape of a model on one rank, and the config file names.
#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/shape_json.hpp"
#include "moetune/config.hpp"

namespace moetune::cli {
namespace {

std::string routing_text(const Routing& r) {
  std::string t = r.scoring + (r.renormalize ? ", renormalized" : ", not renormalized");
  if (r.n_group > 1) t += fmt::format(", grouped top-k {} of {} groups", r.topk_group, r.n_group);
  if (r.routed_scaling_factor != 1.0) t += fmt::format(", scaled by {:g}", r.routed_scaling_factor);
  if (r.correction_bias) t += ", correction bias";
  return t;
}

int run_shapes(const GlobalOptions& g) {
  Target t = resolve_target(g);
  const MoeShape& s = t.shape;
  if (g.json) {
    fmt::print("{}\n", shape_json(s, t.gpu).dump(2));
    return 0;
  }
  std::string block =
      s.block_shape ? fmt::format("block_shape [{}, {}]", (*s.block_shape)[0], (*s.block_shape)[1])
                    : std::string(s.dtype == Dtype::fp8_w8a8 ? "per-tensor" : "");
  fmt::print("model         {}\n", shape_title(s));
  fmt::print("architecture  {}\n", s.architecture.empty() ? "(none)" : s.architecture);
  fmt::print("experts       E={} on this rank (E_global={}, EP {}), topk={}\n", s.E, s.E_global,
             s.ep, s.topk);
  fmt::print("sizes         N={} per rank (TP {}), K={}\n", s.N, s.tp, s.K);
  fmt::print("dtype         {}{}{}\n", to_string(s.dtype), block.empty() ? "" : ", ", block);
  if (!s.dtype_note.empty()) fmt::print("              ({})\n", s.dtype_note);
  fmt::print("routing       {}\n", routing_text(s.routing));
  if (!s.routing.note.empty()) fmt::print("              ({})\n", s.routing.note);
  if (s.num_layers > 0) {
    fmt::print("MoE layers    {} of {}\n", s.moe_layers, s.num_layers);
  } else {  // "0 of 0" read as a model without MoE layers
    fmt::print("MoE layers    unknown (the config gives no layer count)\n");
  }
  fmt::print("config files  for {}:\n", t.gpu.name);
  fmt::print("  sglang      {}\n", config_file_name(s, t.gpu.name, Naming::sglang));
  fmt::print("  vllm        {}\n", config_file_name(s, t.gpu.name, Naming::vllm));
  return 0;
}

}  // namespace

Commands register_shapes(CLI::App& app, const GlobalOptions& g) {
  CLI::App* sub = app.add_subcommand(
      "shapes", "E, N, K, topk, dtype, block_shape, routing, MoE layers and config file names");
  return {{sub, [&g] { return run_shapes(g); }}};
}

}  // namespace moetune::cli
