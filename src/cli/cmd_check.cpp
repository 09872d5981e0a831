// moetune check: kernel results against the fp64 reference (every stage and the layer), fresh
// random inputs. Needs a GPU. Mismatches exit 4.
#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/shape_json.hpp"
#include "moe/check.hpp"
#include "moetune/error.hpp"
#include "moetune/tuner.hpp"

namespace moetune::cli {
namespace {

struct CheckCliOptions {
  std::string batch, variants, configs, seed;
  const CLI::Option* batch_opt = nullptr;
  const CLI::Option* variants_opt = nullptr;
  const CLI::Option* configs_opt = nullptr;
  const CLI::Option* seed_opt = nullptr;
  bool layer_only = false, verbose = false, deterministic = false, align_in_gemm1 = false,
       no_align_in_gemm1 = false, sliced = false, no_sliced = false;
  std::string sliced_stages;
  bool sliced_pairs = false;
};

std::vector<std::string> split_list(const std::string& field, const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    std::size_t comma = text.find(',', start);
    out.push_back(text.substr(start, comma == std::string::npos ? comma : comma - start));
    if (out.back().empty()) throw InputError(field, text, "empty item in the list");
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// The check variant of a shape's own dtype.
std::string own_variant(const MoeShape& s) {
  if (s.dtype == Dtype::fp8_w8a8) return s.block_shape ? "fp8_block" : "fp8_tensor";
  return std::string(to_string(s.dtype));
}

std::string result_line(const moe::CheckResult& r) {
  return fmt::format(
      "{:<4}  {:<22}  {:<10}  M={:<6}  {:<9}  error {:.2e} (limit {:.0e}, {} rows){}",
      r.ok ? "ok" : "FAIL", r.shape, r.dtype, r.M, r.stage, r.error, r.threshold, r.rows,
      r.detail.empty() ? "" : "  " + r.detail);
}

int run_check_command(const GlobalOptions& g, const CheckCliOptions& o) {
  moe::CheckOptions opts;
  if (given(o.batch_opt)) {
    opts.batch.clear();
    for (int M : tune::parse_batch_list(o.batch)) opts.batch.push_back(M);
  }
  if (given(o.variants_opt)) {
    opts.dtypes = split_list("variants", o.variants);
    for (const std::string& v : opts.dtypes) {
      if (std::find(moe::kCheckDtypes.begin(), moe::kCheckDtypes.end(), v) ==
          moe::kCheckDtypes.end()) {
        throw InputError("variants", v, "expected bf16, fp16, fp8_block or fp8_tensor");
      }
    }
  }
  if (given(o.configs_opt)) opts.random_configs = parse_positive_int("configs", o.configs) - 1;
  if (given(o.seed_opt)) opts.seed = static_cast<std::uint64_t>(parse_positive_int("seed", o.seed));
  opts.stages = !o.layer_only;
  opts.topk_sum_in_gemm2 = !o.deterministic;
  if (o.align_in_gemm1 || o.no_align_in_gemm1) opts.alignment_in_gemm1 = o.align_in_gemm1;
  if (o.sliced || o.no_sliced) opts.sliced_gemms = o.sliced;
  if (!o.sliced_stages.empty()) opts.sliced_stages = parse_sliced_stages(o.sliced_stages);
  opts.sliced_pairs = o.sliced_pairs;

  const bool own_model = g.given("model") || g.given("experts") || g.given("topk") ||
                         g.given("intermediate") || g.given("hidden");
  std::optional<MoeShape> shape;
  if (own_model) {
    shape = resolve_shape(g);
    require_runnable(*shape);
    tune::check_token_slots(opts.batch, shape->topk);
    if (!given(o.variants_opt)) opts.dtypes = {own_variant(*shape)};
  } else {
    // The anchors run at their own parallelism and dtypes (--variants): these would be ignored.
    refuse_given(g, {"tp", "ep", "dtype", "block-shape"},
                 "applies to --model's shape; without --model check runs the anchor shapes "
                 "(choose their dtypes with --variants)");
  }
  const GpuSpec gpu = resolve_local_gpu(g);
  if (shape) check_dtype_on_gpu(*shape, gpu);

  auto on_result = [&](const moe::CheckResult& r) {
    if (g.json) return;
    // "layer" and "layer (decode kernels)" always; the other stages when they fail (--verbose: all).
    if (!r.ok || o.verbose || r.stage.rfind("layer", 0) == 0) fmt::print("{}\n", result_line(r));
    std::fflush(stdout);
  };
  moe::CheckReport report =
      shape
          ? moe::check_shape(moe::CheckShape{shape_title(*shape), *shape, 0}, gpu, opts, on_result)
          : moe::run_check(gpu, opts, on_result);
  const int failures = report.failures();

  if (g.json) {
    nlohmann::ordered_json results = nlohmann::ordered_json::array();
    for (const moe::CheckResult& r : report.results) {
      results.push_back({{"shape", r.shape},
                         {"dtype", r.dtype},
                         {"M", r.M},
                         {"stage", r.stage},
                         {"config", r.config},
                         {"error", std::isfinite(r.error) ? nlohmann::ordered_json(r.error)
                                                          : nlohmann::ordered_json(nullptr)},
                         {"threshold", r.threshold},
                         {"ok", r.ok},
                         {"rows", r.rows},
                         {"detail", r.detail}});
    }
    nlohmann::ordered_json j{{"gpu", gpu.name},      {"ok", failures == 0},
                             {"failures", failures}, {"checks", report.results.size()},
                             {"seed", report.seed},  {"wall_s", report.wall_s},
                             {"results", results}};
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("{} checks on {}, {} failed (seed {}, {:.1f} s)\n", report.results.size(), gpu.name,
               failures, report.seed, report.wall_s);
  }
  return failures == 0 ? 0 : kExitProblems;
}

}  // namespace

Commands register_check(CLI::App& app, const GlobalOptions& g) {
  auto o = std::make_shared<CheckCliOptions>();
  CLI::App* sub = app.add_subcommand(
      "check",
      "kernel results against an fp64 reference (every stage and the layer; random inputs). "
      "Without --model: the anchor shapes in every dtype");
  o->batch_opt =
      sub->add_option("--batch", o->batch, "batch sizes (default 1,3,8,64,257,1024,4096)")
          ->type_name("M,...");
  o->variants_opt = sub->add_option("--variants", o->variants,
                                    "dtype variants: bf16,fp16,fp8_block,fp8_tensor (default: "
                                    "the model's own; all four without --model)")
                        ->type_name("LIST");
  o->configs_opt = sub->add_option("--configs", o->configs,
                                   "configs per case: the default plus N-1 random valid ones "
                                   "(default 2)")
                       ->type_name("N");
  o->seed_opt = sub->add_option("--seed", o->seed, "random seed, a positive integer (default: fresh)")->type_name("N");
  sub->add_flag("--layer-only", o->layer_only, "check the whole layer only, not each stage");
  sub->add_flag("--verbose", o->verbose, "print every check, not only layers and failures");
  CLI::Option* deterministic = sub->add_flag(
      "--deterministic", o->deterministic,
      "check the layer with the separate top-k sum and without the sliced kernel (default on "
      "sm_90+: GEMM2 adds it into the output with atomics)");
  CLI::Option* on = sub->add_flag(
      "--align-in-gemm1", o->align_in_gemm1,
      "check layers whose GEMM1 derives the alignment itself at decode sizes wherever it can "
      "(the align launch skipped; default: the GPU's rule, on the H100 SXM where GEMM1 fuses the "
      "activation, and wherever the sliced kernel runs)");
  sub->add_flag("--no-align-in-gemm1", o->no_align_in_gemm1,
                "check layers with the align launch at every size")
      ->excludes(on);
  CLI::Option* sliced = sub->add_flag(
      "--sliced", o->sliced,
      "check block-fp8 layers with the sliced GEMM kernel wherever it applies (sm_90a, M <= 64; "
      "default: the GPU's rule, on the H100 SXM and H200 where it was measured to win)");
  sub->add_flag("--no-sliced", o->no_sliced, "check layers without the sliced kernel")
      ->excludes(sliced);
  sub->add_option("--sliced-stages", o->sliced_stages,
                  "the sliced kernel's ring slots of 36 KB, 2..5, where it runs (default: 4)")
      ->type_name("N");
  sub->add_flag("--sliced-pairs", o->sliced_pairs,
                "the sliced kernel, where it runs and N = 256, in pairs of blocks (clusters of "
                "two) that swap activation halves (default: off)");
  sliced->excludes(deterministic);  // the sliced kernel's adds land in any order
  return {{sub, [&g, o] { return run_check_command(g, *o); }}};
}

}  // namespace moetune::cli
