#include "cli/options.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cstdio>

#include "cuda/context.hpp"
#include "cuda/driver.hpp"
#include "moetune/dtype.hpp"
#include "moetune/error.hpp"

namespace moetune::cli {

void add_global_options(CLI::App& app, GlobalOptions& g) {
  const char* grp = "Model and target (every command)";
  app.add_option("--model", g.model,
                 "HF config.json, a folder holding one, or a preset name "
                 "(default: qwen3.5-122b-a10b-fp8 at --tp 4)")
      ->group(grp);
  app.add_option("--tp", g.tp, "tensor parallelism: divides the expert intermediate size")
      ->group(grp);
  app.add_option("--ep", g.ep, "expert parallelism: divides the experts")->group(grp);
  app.add_option("--dtype", g.dtype, "auto|bf16|fp16|fp8_w8a8 (auto: from the config)")->group(grp);
  app.add_option("--gpu", g.gpu,
                 "GPU spec name or alias (default: the local GPU; none: NVIDIA H200)")
      ->group(grp);
  app.add_option("--experts", g.experts, "override: experts in the model")->group(grp);
  app.add_option("--topk", g.topk, "override: experts per token")->group(grp);
  app.add_option("--intermediate", g.intermediate, "override: expert intermediate size (before TP)")
      ->group(grp);
  app.add_option("--hidden", g.hidden, "override: hidden size")->group(grp);
  app.add_option("--block-shape", g.block_shape, "fp8 weight block BN,BK (e.g. 128,128)")
      ->group(grp);
  app.add_flag("--json", g.json, "machine-readable output on stdout")->group(grp);
}

int parse_positive_int(const std::string& field, const std::string& text) {
  int v = 0;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(first, last, v);
  if (text.empty()) throw InputError(field, "\"\"", "expected a positive integer");
  if (ec == std::errc::result_out_of_range) throw InputError(field, text, "out of range");
  if (ec != std::errc() || ptr != last) {
    throw InputError(field, text, "expected a positive integer");
  }
  if (v < 1) throw InputError(field, text, "must be at least 1");
  return v;
}

std::vector<int> parse_batch_list(const std::string& field, const std::string& text) {
  std::vector<int> out;
  std::size_t start = 0;
  while (true) {
    std::size_t comma = text.find(',', start);
    std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    out.push_back(parse_positive_int(field, item));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string parse_dtype_option(const std::string& text) {
  if (text == "auto") return text;
  auto d = parse_dtype(text);
  if (!d) throw InputError("dtype", text, "expected auto, bf16, fp16 or fp8_w8a8");
  return std::string(to_string(*d));
}

std::string model_name(const GlobalOptions& g) {
  return g.model.empty() ? std::string(kDefaultPreset) : g.model;
}

ModelOptions model_options(const GlobalOptions& g) {
  ModelOptions o;
  o.tp = !g.tp.empty() ? parse_positive_int("tp", g.tp) : (g.model.empty() ? kDefaultTp : 1);
  o.ep = !g.ep.empty() ? parse_positive_int("ep", g.ep) : 1;
  o.dtype = parse_dtype_option(g.dtype);
  if (!g.experts.empty()) o.experts = parse_positive_int("experts", g.experts);
  if (!g.topk.empty()) o.topk = parse_positive_int("topk", g.topk);
  if (!g.intermediate.empty()) o.intermediate = parse_positive_int("intermediate", g.intermediate);
  if (!g.hidden.empty()) o.hidden = parse_positive_int("hidden", g.hidden);
  if (!g.block_shape.empty()) o.block_shape = parse_block_shape(g.block_shape, "block-shape");
  return o;
}

MoeShape resolve_shape(const GlobalOptions& g) {
  return load_model(model_name(g), model_options(g));
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
  if (!g.gpu.empty()) return "--gpu";
  return cuda::gpu_available() ? "local GPU" : "fallback";
}

GpuSpec resolve_gpu(const GlobalOptions& g) {
  if (!g.gpu.empty()) return require_gpu(g.gpu);
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

Target resolve_target(const GlobalOptions& g) {
  Target t{resolve_shape(g), resolve_gpu(g)};
  check_dtype_on_gpu(t.shape, t.gpu);
  return t;
}

}  // namespace moetune::cli
