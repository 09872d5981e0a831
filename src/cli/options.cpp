#include "cli/options.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>

#include "cuda/context.hpp"
#include "cuda/driver.hpp"
#include "moetune/dtype.hpp"
#include "moetune/error.hpp"
#include "moetune/fused_moe.hpp"
#include "moe/sliced.hpp"
#include "moe/stages.hpp"
#include "moetune/tuner.hpp"

namespace moetune::cli {

void add_global_options(CLI::App& app, GlobalOptions& g) {
  const char* grp = "Model and target (every command)";
  auto add = [&](const char* name, std::string& value, const char* help, const char* type) {
    g.options[name] =
        app.add_option(std::string("--") + name, value, help)->group(grp)->type_name(type);
  };
  add("model", g.model,
      "HF config.json, a folder holding one, or a preset name "
      "(default: qwen3.5-122b-a10b-fp8 at --tp 4)",
      "PATH|PRESET");
  add("tp", g.tp, "tensor parallelism: divides the expert intermediate size (default 1)", "N");
  add("ep", g.ep, "expert parallelism: divides the experts (default 1)", "N");
  add("dtype", g.dtype, "auto|bf16|fp16|fp8_w8a8 (auto: from the config)", "DTYPE");
  add("gpu", g.gpu, "GPU spec name or alias (default: the local GPU; none: NVIDIA H200)", "NAME");
  add("experts", g.experts, "override: experts in the model", "N");
  add("topk", g.topk, "override: experts per token", "N");
  add("intermediate", g.intermediate, "override: expert intermediate size (before TP)", "N");
  add("hidden", g.hidden, "override: hidden size", "N");
  add("block-shape", g.block_shape, "fp8 weight block BN,BK (e.g. 128,128)", "BN,BK");
  app.add_flag("--json", g.json, "machine-readable output on stdout")->group(grp);
}

bool GlobalOptions::given(const std::string& name) const {
  auto it = options.find(name);
  return it != options.end() && cli::given(it->second);
}

void refuse_given(const GlobalOptions& g, std::initializer_list<const char*> names,
                  const std::string& reason) {
  for (const char* name : names) {
    if (!g.given(name)) continue;
    const auto& given = g.options.at(name)->results();
    throw InputError(name, given.empty() ? "" : given.back(), reason);
  }
}

int parse_positive_int(const std::string& field, const std::string& text) {
  int v = 0;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(first, last, v);
  if (ec == std::errc::result_out_of_range) throw InputError(field, text, "out of range");
  if (ec != std::errc() || ptr != last) {
    throw InputError(field, text, "expected a positive integer");
  }
  if (v < 1) throw InputError(field, text, "must be at least 1");
  return v;
}

int parse_sliced_stages(const std::string& text) {
  const int v = parse_positive_int("sliced-stages", text);
  if (const std::string why = moe::sliced_stages_violation(v); !why.empty())
    throw InputError("sliced-stages", text, why);
  return v;
}

std::string parse_dtype_option(const std::string& text) {
  // Case-insensitive like the dtype names themselves (and the model loader's "auto").
  std::string lower = text;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (lower == "auto") return lower;
  auto d = parse_dtype(text);
  if (!d) throw InputError("dtype", text, "expected auto, bf16, fp16 or fp8_w8a8");
  return std::string(to_string(*d));
}

std::string model_name(const GlobalOptions& g) {
  return g.given("model") ? g.model : std::string(kDefaultPreset);
}

ModelOptions model_options(const GlobalOptions& g) {
  ModelOptions o;
  o.tp = g.given("tp") ? parse_positive_int("tp", g.tp) : (g.given("model") ? 1 : kDefaultTp);
  o.ep = g.given("ep") ? parse_positive_int("ep", g.ep) : 1;
  o.dtype = parse_dtype_option(g.dtype);
  if (g.given("experts")) o.experts = parse_positive_int("experts", g.experts);
  if (g.given("topk")) o.topk = parse_positive_int("topk", g.topk);
  if (g.given("intermediate")) o.intermediate = parse_positive_int("intermediate", g.intermediate);
  if (g.given("hidden")) o.hidden = parse_positive_int("hidden", g.hidden);
  if (g.given("block-shape")) o.block_shape = parse_block_shape(g.block_shape, "block-shape");
  return o;
}

MoeShape resolve_shape(const GlobalOptions& g) {
  MoeShape s = load_model(model_name(g), model_options(g));
  // The default model comes with its TP; an --ep on top is easy to misread as pure EP. Said
  // once, and only for a shape that loaded (bad input stays one line).
  static bool noted = false;
  if (!g.given("model") && !g.given("tp") && s.ep > 1 && !noted) {
    noted = true;
    std::fprintf(stderr,
                 "moetune: note: the default model runs at TP%d; --ep %d splits its experts on "
                 "top of that (add --tp 1 for expert parallelism alone)\n",
                 s.tp, s.ep);
  }
  // --tp and --ep both given: every command models tp x ep ranks; said once, on stderr, for all
  // (the default model's own TP under an --ep has the note above).
  static bool parallel_noted = false;
  if (const std::string note = parallel_note(s);
      !note.empty() && g.given("tp") && g.given("ep") && !parallel_noted) {
    parallel_noted = true;
    std::fprintf(stderr, "moetune: note: %s\n", note.c_str());
  }
  return s;
}

namespace {

// A spec for a local GPU that the table does not know: what the device query tells (no peak
// FLOP/s; the bandwidth from memory clock and bus width, double data rate).
GpuSpec spec_from_device(const cuda::DeviceInfo& d) {
  GpuSpec s;
  s.name = d.name;
  s.mem_bandwidth_Bps = 2.0 * d.memory_clock_khz * 1e3 * d.memory_bus_bits / 8.0;
  s.sm_count = d.sm_count;
  s.smem_per_block_bytes = d.smem_per_block_optin_bytes;
  s.l2_bytes = d.l2_bytes;
  s.cc_major = d.cc_major;
  s.cc_minor = d.cc_minor;
  s.source = "device query (not in moetune's spec table: no peak FLOP/s)";
  return s;
}

}  // namespace

std::string gpu_origin(const GlobalOptions& g) {
  if (g.given("gpu")) return "--gpu";
  return cuda::gpu_available() ? "local GPU" : "fallback";
}

GpuSpec resolve_gpu(const GlobalOptions& g) {
  if (g.given("gpu")) return require_gpu(g.gpu);
  std::string why;
  if (cuda::gpu_available(&why)) {
    cuda::DeviceInfo info = cuda::query_device(0);
    if (const GpuSpec* s = find_gpu(info.name)) return *s;
    return spec_from_device(info);
  }
  static bool said = false;
  if (!said) {
    said = true;
    std::fprintf(stderr, "moetune: note: no GPU (%s); using the %s spec (choose with --gpu)\n",
                 why.c_str(), kFallbackGpu);
  }
  return require_gpu(kFallbackGpu);
}

GpuSpec resolve_local_gpu(const GlobalOptions& g) {
  // A misspelt --gpu is bad input (exit 2) with or without a GPU here.
  if (g.given("gpu")) (void)require_gpu(g.gpu);
  cuda::require_gpu();
  cuda::DeviceInfo info = cuda::query_device(0);
  const GpuSpec* known = find_gpu(info.name);
  GpuSpec local = known ? *known : spec_from_device(info);
  if (g.given("gpu")) {
    const GpuSpec& asked = require_gpu(g.gpu);
    if (asked.name != local.name) {
      throw InputError("gpu", g.gpu,
                       fmt::format("this command runs on the local GPU, {}; leave --gpu out or "
                                   "choose the device with CUDA_VISIBLE_DEVICES",
                                   info.name));
    }
  }
  return local;
}

namespace {

// The kernels name their own quantities (K, N, E); the error says which model size each is.
[[noreturn]] void throw_for_model(const InputError& e) {
  static const std::map<std::string, std::string> kWhat = {
      {"K", "K (the hidden size)"},
      {"N", "N (the expert intermediate size per TP rank)"},
      {"E", "E (experts per EP rank)"},
      {"E_global", "E_global (the experts)"},
      {"block_shape", "block_shape (its block_k)"}};
  const auto it = kWhat.find(e.field());
  throw InputError(it == kWhat.end() ? e.field() : it->second, e.value(),
                   e.reason() + " for moetune's kernels");
}

}  // namespace

void require_runnable(const MoeShape& shape) {
  try {
    moe::check_stage_shape(shape, 0);
  } catch (const InputError& e) {
    throw_for_model(e);
  }
}

void require_layer_runs(const MoeShape& shape, const GpuSpec& gpu) {
  try {
    (void)FusedMoe(shape, gpu);  // plans only: no GPU is touched
  } catch (const InputError& e) {
    throw_for_model(e);
  }
}

Target resolve_local_target(const GlobalOptions& g, std::span<const std::int64_t> batch) {
  MoeShape shape = resolve_shape(g);
  require_runnable(shape);
  tune::check_token_slots(batch, shape.topk);
  Target t{std::move(shape), resolve_local_gpu(g)};
  check_dtype_on_gpu(t.shape, t.gpu);
  return t;
}

Target resolve_target(const GlobalOptions& g) {
  Target t{resolve_shape(g), resolve_gpu(g)};
  check_dtype_on_gpu(t.shape, t.gpu);
  return t;
}

}  // namespace moetune::cli
