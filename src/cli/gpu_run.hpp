// What `bench` and `profile` share: the tables to run (--config FILE and its _down sibling) and
// the measurement options (--batch, --hot, --measured-ceilings, --no-pdl).
#pragma once
#include <optional>
#include <string>

#include "cli/commands.hpp"
#include "moe/profile.hpp"
#include "moetune/config.hpp"
#include "moetune/fused_moe.hpp"

namespace moetune::cli {

struct Tables {
  ConfigTable up, down;  // empty = moetune's defaults / fall back to up
  std::string label;     // "default" or the file name
};
// FILE as the up table; "<FILE without .json>_down.json" as the down table when it exists.
Tables read_tables(const std::string& file, const std::string& field = "config");

// --config FILE (or --vs FILE2).
struct ConfigCliOption {
  std::string file;
  const CLI::Option* opt = nullptr;
};
// read_tables(--config), or moetune's defaults (label "default") without --config.
Tables tables_of(const ConfigCliOption& config);

struct MeasureCliOptions {
  std::string batch;
  const CLI::Option* batch_opt = nullptr;
  bool hot = false;
  bool measured_ceilings = false;
  bool no_pdl = false;  // --no-pdl: plain stage launches (FusedMoeOptions::pdl = false)
  bool no_decode_kernels = false;  // --no-decode-kernels: the stage kernels at every M
  bool sliced = false;      // --sliced: the sliced GEMM kernel wherever it applies
  bool no_sliced = false;   // --no-sliced: never (default: the GPU's rule)
  std::string sliced_stages;  // --sliced-stages N: its ring slots (2..5; default 4)
  bool sliced_pairs = false;  // --sliced-pairs: its pairs instance where N = 256
  bool persistent = false;  // --persistent: the persistent GEMM kernel where it applies (A/B)
  bool align_in_gemm1 = false;  // --align-in-gemm1: GEMM1 derives the alignment (decode sizes)
  bool no_align_in_gemm1 = false;  // --no-align-in-gemm1: never (default: the GPU's rule)
  bool deterministic = false;  // --deterministic: the separate top-k sum (bit-reproducible)
};
void add_measure_options(CLI::App& sub, MeasureCliOptions& o);
// BenchOptions from the flags (no GPU work).
moe::BenchOptions bench_options(const MeasureCliOptions& o);
// The FusedMoe options of the flags (--no-pdl).
FusedMoeOptions fused_moe_options(const MeasureCliOptions& o);
// With --measured-ceilings: measures the local ceilings (or reads their cache). Needs a GPU.
void add_measured_ceilings(const MeasureCliOptions& o, moe::BenchOptions& b);

// The subcommand `name` (bench, profile) with, in this order, --config (help: config_help),
// --vs FILE2 when vs is not null, and the measure options; `run` is its action.
Commands tables_command(CLI::App& app, const std::string& name, const std::string& description,
                        ConfigCliOption& config, const std::string& config_help,
                        ConfigCliOption* vs, MeasureCliOptions& measure, std::function<int()> run);

}  // namespace moetune::cli
