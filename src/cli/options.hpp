// The options every command takes, and the one place they become a MoeShape and a GpuSpec.
#pragma once
#include <CLI/CLI.hpp>
#include <map>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "moetune/gpu_spec.hpp"
#include "moetune/model.hpp"

namespace moetune::cli {

// Global options as typed. Numbers stay text until parse_* reads them, so that a bad value is
// reported as `<field>=<value>: <reason>` like every other input error.
struct GlobalOptions {
  std::string model;  // path or preset; empty = the embedded default at kDefaultTp
  std::string tp, ep;
  std::string dtype = "auto";
  std::string gpu;
  std::string experts, topk, intermediate, hidden;
  std::string block_shape;
  bool json = false;
  std::vector<std::string> argv;  // the command line, for provenance records

  // Whether an option was given on the command line (an empty value counts: `--tp ""` is an
  // error, not the default). `name` without dashes, e.g. "tp".
  bool given(const std::string& name) const;
  std::map<std::string, const CLI::Option*> options;  // filled by add_global_options
};

// InputError (exit 2) naming the first of `names` (global options, without dashes) that was
// given, with its value and `reason`: for a command on which those options would be ignored.
void refuse_given(const GlobalOptions& g, std::initializer_list<const char*> names,
                  const std::string& reason);

// Whether `opt` appeared on the command line.
inline bool given(const CLI::Option* opt) { return opt != nullptr && opt->count() > 0; }

// Adds the global options to `app` (subcommands see them through fallthrough).
void add_global_options(CLI::App& app, GlobalOptions& g);

// A positive decimal integer, whole text; else InputError(field, text, ...).
int parse_positive_int(const std::string& field, const std::string& text);
// `--sliced-stages` (bench, profile, check): the sliced kernel's ring slots, 2..5.
int parse_sliced_stages(const std::string& text);
// Every command's --batch: tune::parse_batch_list (moetune/tuner.hpp).
// "--dtype" value: auto or a dtype spelling, in any case; returns the canonical spelling
// ("auto", "bf16", "fp16", "fp8_w8a8").
std::string parse_dtype_option(const std::string& text);

// --model/--tp/--ep/--dtype/overrides -> ModelOptions (the no---model default is TP4).
ModelOptions model_options(const GlobalOptions& g);
// The model path or preset the options name.
std::string model_name(const GlobalOptions& g);
// load_model with the options above.
MoeShape resolve_shape(const GlobalOptions& g);
// --gpu, else the local GPU (device query), else kFallbackGpu (said once on stderr).
GpuSpec resolve_gpu(const GlobalOptions& g);
// Where resolve_gpu's answer came from: "--gpu", "local GPU", "fallback".
std::string gpu_origin(const GlobalOptions& g);

// For commands that run on the GPU: throws GpuUnavailable (exit 3) without one, else the local
// device's spec (device 0; choose with CUDA_VISIBLE_DEVICES). A --gpu naming another GPU is an
// InputError: these commands measure the GPU they run on.
GpuSpec resolve_local_gpu(const GlobalOptions& g);

struct Target {
  MoeShape shape;
  GpuSpec gpu;
};
// Shape first (so a bad model is the only message), then the GPU, then the dtype-on-GPU check.
Target resolve_target(const GlobalOptions& g);
// The same for the GPU commands: the shape, which moetune's kernels must be able to run
// (require_runnable), then the local GPU (resolve_local_gpu).
// batch: the Ms the command will run, checked against the shape's topk (check_token_slots).
Target resolve_local_target(const GlobalOptions& g, std::span<const std::int64_t> batch = {});
// InputError (exit 2) when moetune's kernels cannot run `shape` (moe::check_stage_shape: N and
// K multiples of 8, block_k 64, 128 or k*256 dividing N and K, experts and groups in range),
// before any GPU is looked for: the tuner's dry run and the GPU commands say so at once instead
// of planning a sweep whose every candidate is pruned, or exiting 3 on a machine without a GPU.
void require_runnable(const MoeShape& shape);
// InputError (exit 2, named as require_runnable's) when moetune's layer with its defaults refuses
// `shape` on `gpu` (FusedMoe's constructor: e.g. fp8 rows that are not whole 16-byte chunks,
// N = 360 for gpt-oss at TP8): `tune` checks it before planning, since nothing would run the
// tables it writes. Touches no GPU.
void require_layer_runs(const MoeShape& shape, const GpuSpec& gpu);

}  // namespace moetune::cli
