// moetune kernels --compile-only --arch sm_90a: compiles the representative kernel set with
// NVRTC (no GPU needed; CI runs it). A compile failure is reported per kernel and exits 1.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <regex>

#include "cli/commands.hpp"
#include "cuda/driver.hpp"
#include "cuda/jit.hpp"
#include "cuda/nvrtc.hpp"
#include "moe/check.hpp"
#include "moetune/error.hpp"

namespace moetune::cli {
namespace {

struct KernelsOptions {
  std::string arch, threads;
  const CLI::Option* arch_opt = nullptr;
  const CLI::Option* threads_opt = nullptr;
  bool compile_only = false;
  bool list = false;
};

// The line of an NVRTC log that says what failed: the first naming an error, else the first
// that says something (the first line is often just "file(line):", the error below it).
std::string first_log_line(const std::string& log) {
  std::string first;
  std::size_t start = 0;
  while (start < log.size()) {
    std::size_t end = log.find('\n', start);
    std::string line =
        log.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (line.find("error") != std::string::npos) return line;
    if (first.empty() && line.find_first_not_of(" \t\r") != std::string::npos) first = line;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return first.empty() ? "(no log)" : first;
}

// moetune's kernels use cp.async and bf16 mma.sync: sm_80 and newer.
constexpr int kMinArch = 80;

// A target NVRTC does not know (sm_999) is bad input, for --list too (it compiles nothing but
// names kernels for that target). Where NVRTC cannot be loaded, --list still lists (compiling
// fails later with the loader's message).
void require_nvrtc_target(const std::string& arch, bool list) {
  std::vector<int> archs;
  try {
    archs = cuda::nvrtc_supported_archs();
  } catch (const CudaError&) {
    if (list) return;
    throw;
  }
  const int cc = std::stoi(arch.substr(3));  // "sm_90a" -> 90 (the regex admits digits only)
  if (archs.empty() || std::find(archs.begin(), archs.end(), cc) != archs.end()) return;
  throw InputError("arch", arch,
                   fmt::format("not a target of NVRTC {} (it has sm_{})", cuda::nvrtc_version(),
                               fmt::join(archs, ", sm_")));
}

int run_kernels(const GlobalOptions& g, const KernelsOptions& o) {
  // The set is the anchors' (every kernel file, dtype and path): a model's options would be
  // ignored, so they are refused (bench and tune compile a model's own kernels).
  refuse_given(g,
               {"model", "tp", "ep", "dtype", "experts", "topk", "intermediate", "hidden",
                "block-shape"},
               "kernels compiles the representative set of the anchor shapes; a model's own "
               "kernels are compiled by bench, check --model and tune");
  std::string arch;
  if (given(o.arch_opt)) {
    if (!std::regex_match(o.arch, std::regex(R"(sm_[0-9]{2,3}[af]?)"))) {
      throw InputError("arch", o.arch, "expected an NVRTC target such as sm_80, sm_89, sm_90a");
    }
    if (std::stoi(o.arch.substr(3)) < kMinArch) {
      throw InputError("arch", o.arch,
                       fmt::format("moetune's kernels need sm_{} or newer (cp.async, bf16 "
                                   "mma.sync)",
                                   kMinArch));
    }
    require_nvrtc_target(o.arch, o.list);
    arch = o.arch;
    if (g.given("gpu")) (void)resolve_gpu(g);  // a misspelt --gpu is still bad input
  } else if (g.given("gpu") || o.compile_only || o.list) {
    arch = resolve_gpu(g).arch();  // --gpu's, the local GPU's, or the fallback's
  } else {
    arch = resolve_local_gpu(g).arch();
  }
  const int threads = given(o.threads_opt) ? parse_positive_int("threads", o.threads) : 0;
  std::vector<cuda::KernelSpec> specs = moe::kernel_specs_for_compile_only(arch);

  if (o.list) {
    if (g.json) {
      nlohmann::ordered_json j{{"arch", arch}, {"kernels", nlohmann::ordered_json::array()}};
      for (const cuda::KernelSpec& s : specs) {
        j["kernels"].push_back({{"name", s.name}, {"file", s.file}, {"kernel", s.kernel}});
      }
      fmt::print("{}\n", j.dump(2));
    } else {
      for (const cuda::KernelSpec& s : specs) fmt::print("{}\n", s.name);
    }
    return 0;
  }
  const auto start = std::chrono::steady_clock::now();
  std::vector<cuda::CompiledKernel> compiled = cuda::Jit::instance().compile_many(specs, threads);
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  int failed = 0, cached = 0;
  double compile_s = 0;
  nlohmann::ordered_json failures = nlohmann::ordered_json::array();
  for (const cuda::CompiledKernel& k : compiled) {
    if (k.cubin.empty()) {
      ++failed;
      failures.push_back({{"name", k.spec.name}, {"log", k.log}});
      continue;
    }
    cached += k.from_cache ? 1 : 0;
    compile_s += k.compile_s;
  }
  // Every kernel refused as an invalid option: NVRTC does not know the target (e.g. sm_999).
  if (failed > 0 && failed == static_cast<int>(compiled.size()) &&
      std::all_of(failures.begin(), failures.end(), [](const auto& f) {
        return f["log"].template get<std::string>().find("INVALID_OPTION") != std::string::npos;
      })) {
    throw InputError("arch", arch,
                     fmt::format("NVRTC {} cannot compile for it", cuda::Jit::instance().nvrtc_version()));
  }
  if (!o.compile_only) {
    // With a GPU: load each compiled kernel too (module load, registers).
    cuda::require_gpu();
    for (const cuda::CompiledKernel& k : compiled) {
      if (!k.cubin.empty()) cuda::Jit::instance().get(k.spec);
    }
  }

  if (g.json) {
    nlohmann::ordered_json j{{"arch", arch},
                             {"nvrtc", cuda::Jit::instance().nvrtc_version()},
                             {"kernels", compiled.size()},
                             {"compiled", compiled.size() - failed - cached},
                             {"from_cache", cached},
                             {"failed", failed},
                             {"wall_s", wall_s},
                             {"compile_s", compile_s},
                             {"loaded", !o.compile_only},
                             {"failures", failures}};
    fmt::print("{}\n", j.dump(2));
  } else {
    for (const auto& f : failures) {
      fmt::print("FAILED {}: {}\n", f["name"].get<std::string>(),
                 first_log_line(f["log"].get<std::string>()));
    }
    fmt::print(
        "{} kernels for {} (NVRTC {}): {} compiled, {} from the cache, {} failed in {:.1f} s "
        "({:.1f} s of compile time){}\n",
        compiled.size(), arch, cuda::Jit::instance().nvrtc_version(),
        compiled.size() - failed - cached, cached, failed, wall_s, compile_s,
        o.compile_only ? "" : "; loaded on the GPU");
    fmt::print("cache: {}\n", cuda::Jit::instance().cache_dir());
  }
  if (failed > 0) {
    throw CudaError(
        fmt::format("{} of {} kernels failed to compile for {}", failed, compiled.size(), arch));
  }
  return 0;
}

}  // namespace

Commands register_kernels(CLI::App& app, const GlobalOptions& g) {
  auto o = std::make_shared<KernelsOptions>();
  CLI::App* sub = app.add_subcommand(
      "kernels", "compile the representative kernel set with NVRTC (--compile-only: no GPU)");
  sub->add_flag("--compile-only", o->compile_only, "compile only, do not load (no GPU needed)");
  o->arch_opt = sub->add_option("--arch", o->arch,
                                "NVRTC target, e.g. sm_90a (default: the GPU's, see --gpu)")
                    ->type_name("ARCH");
  o->threads_opt = sub->add_option("--threads", o->threads, "compile threads (default: all cores)")
                       ->type_name("N");
  sub->add_flag("--list", o->list, "list the kernel instances, compile nothing");
  return {{sub, [&g, o] { return run_kernels(g, *o); }}};
}

}  // namespace moetune::cli
