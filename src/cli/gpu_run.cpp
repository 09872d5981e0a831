#include "cli/gpu_run.hpp"

#include <fmt/format.h>

#include <filesystem>

#include "bench/ceilings.hpp"
#include "moetune/error.hpp"
#include "moetune/tuner.hpp"

namespace moetune::cli {

Tables read_tables(const std::string& file, const std::string& field) {
  try {
    Tables t;
    t.label = std::filesystem::path(file).filename().string();
    t.up = to_table(read_config_table(file));
    // An empty table would mean "moetune's defaults" to FusedMoe: the run would be labelled
    // with this file while timing the defaults.
    if (t.up.empty()) throw InputError("config", file, "the table has no entries");
    std::string stem = file;
    if (stem.ends_with(".json")) stem.resize(stem.size() - 5);
    const std::string down = stem + "_down.json";
    if (!stem.ends_with("_down") && std::filesystem::exists(down)) {
      t.down = to_table(read_config_table(down));
      if (t.down.empty()) throw InputError("config", down, "the table has no entries");
      fmt::print(stderr, "moetune: note: down table {}\n", down);
    }
    return t;
  } catch (const InputError& e) {
    // The table reader names its input "config"; say which option it came from (--vs).
    if (e.field() != "config" || field == "config") throw;
    throw InputError(field, e.value(), e.reason());
  }
}

Commands tables_command(CLI::App& app, const std::string& name, const std::string& description,
                        ConfigCliOption& config, const std::string& config_help,
                        ConfigCliOption* vs, MeasureCliOptions& measure, std::function<int()> run) {
  CLI::App* sub = app.add_subcommand(name, description);
  config.opt = sub->add_option("--config", config.file, config_help)->type_name("FILE");
  if (vs) {
    vs->opt =
        sub->add_option("--vs", vs->file, "a second table to compare against")->type_name("FILE2");
  }
  add_measure_options(*sub, measure);
  return {{sub, std::move(run)}};
}

Tables tables_of(const ConfigCliOption& config) {
  return given(config.opt) ? read_tables(config.file) : Tables{{}, {}, "default"};
}

void add_measure_options(CLI::App& sub, MeasureCliOptions& o) {
  o.batch_opt = sub.add_option("--batch", o.batch, "batch sizes (default 1,8,64,256,1024,4096)")
                    ->type_name("M,...");
  sub.add_flag("--hot", o.hot, "cache-resident inputs (default: cold, rotating routing sets)");
  sub.add_flag("--measured-ceilings", o.measured_ceilings,
               "also report floor_measured_us over locally measured ceilings (cached)");
  sub.add_flag("--no-pdl", o.no_pdl,
               "launch the stage kernels without programmatic dependent launch (default: PDL on "
               "sm_90+)");
  sub.add_flag("--no-decode-kernels", o.no_decode_kernels,
               "run the stage kernels at M <= 4 too (default: the two decode kernels there, "
               "where the shape fits them; fewer or none on some shapes)");
  sub.add_flag("--persistent", o.persistent,
               "block fp8 on sm_90a at M <= 32: GEMM1 and GEMM2 in one persistent kernel "
               "(default: two stage kernels; the persistent one is slower on the H200 so far)");
  CLI::Option* sliced = sub.add_flag(
      "--sliced", o.sliced,
      "block fp8 on sm_90a at M <= 64: GEMM1, SiLU·up and GEMM2 with the top-k sum in one "
      "kernel, a block per 128 columns of the intermediate (default: on the H100 SXM and H200 "
      "where its blocks fit one wave or, at N = 256, 1.5..2.2 / 2.0 waves: M = 6..8 and 14..24 / "
      "14..20 on the anchors; the stage kernels elsewhere)");
  sub.add_flag("--no-sliced", o.no_sliced, "never the sliced kernel (default: see --sliced)")
      ->excludes(sliced);
  sub.add_option("--sliced-stages", o.sliced_stages,
                 "the sliced kernel's ring slots of 36 KB, 2..5, where it runs (default: 4)")
      ->type_name("N");
  sub.add_flag("--sliced-pairs", o.sliced_pairs,
               "the sliced kernel, where it runs and N = 256, as clusters of two blocks that swap "
               "activation halves, w2 read in 256-byte runs (default: off)");
  sub.add_flag("--deterministic", o.deterministic,
               "bit-reproducible output: the top-k sum as its own launch in a fixed order, and "
               "never the sliced kernel (default on sm_90+: GEMM2 adds each slot's row into the "
               "output with atomics, whose order varies from run to run)")
      ->excludes(sliced);
  CLI::Option* on = sub.add_flag(
      "--align-in-gemm1", o.align_in_gemm1,
      "GEMM1 derives the alignment from topk_ids in each block at decode sizes and writes the "
      "tables for GEMM2: no align launch (default: on the H100 SXM where GEMM1 fuses the "
      "activation, off elsewhere; the sliced kernel, where it runs, derives it too)");
  sub.add_flag("--no-align-in-gemm1", o.no_align_in_gemm1,
               "always launch the alignment (default: see --align-in-gemm1)")
      ->excludes(on);
}

FusedMoeOptions fused_moe_options(const MeasureCliOptions& o) {
  FusedMoeOptions f;
  f.pdl = !o.no_pdl;
  f.decode_kernels = !o.no_decode_kernels;
  f.persistent_gemms = o.persistent;
  if (o.sliced || o.no_sliced) f.sliced_gemms = o.sliced;
  if (!o.sliced_stages.empty()) f.sliced_stages = parse_sliced_stages(o.sliced_stages);
  f.sliced_pairs = o.sliced_pairs;
  f.topk_sum_in_gemm2 = !o.deterministic;
  if (o.align_in_gemm1 || o.no_align_in_gemm1) f.alignment_in_gemm1 = o.align_in_gemm1;
  return f;
}

moe::BenchOptions bench_options(const MeasureCliOptions& o) {
  moe::BenchOptions b;
  if (given(o.batch_opt)) {
    b.batch.clear();
    for (int M : tune::parse_batch_list(o.batch)) b.batch.push_back(M);
  }
  b.hot = o.hot;
  return b;
}

void add_measured_ceilings(const MeasureCliOptions& o, moe::BenchOptions& b) {
  if (o.measured_ceilings) b.measured = bench::measure_ceilings(0);
}

}  // namespace moetune::cli
