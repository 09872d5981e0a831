// dlopen of libnvrtc, lookup of the toolkit include dir, and one compile call.
#include "cuda/nvrtc.hpp"

#include <dlfcn.h>
#include <link.h>
#include <nvrtc.h>  // types only

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "moetune/error.hpp"

namespace moetune::cuda {
namespace {

namespace fs = std::filesystem;

struct NvrtcApi {
  decltype(&::nvrtcVersion) nvrtcVersion = nullptr;
  decltype(&::nvrtcGetErrorString) nvrtcGetErrorString = nullptr;
  decltype(&::nvrtcCreateProgram) nvrtcCreateProgram = nullptr;
  decltype(&::nvrtcDestroyProgram) nvrtcDestroyProgram = nullptr;
  decltype(&::nvrtcCompileProgram) nvrtcCompileProgram = nullptr;
  decltype(&::nvrtcGetProgramLogSize) nvrtcGetProgramLogSize = nullptr;
  decltype(&::nvrtcGetProgramLog) nvrtcGetProgramLog = nullptr;
  decltype(&::nvrtcGetCUBINSize) nvrtcGetCUBINSize = nullptr;
  decltype(&::nvrtcGetCUBIN) nvrtcGetCUBIN = nullptr;
  decltype(&::nvrtcGetPTXSize) nvrtcGetPTXSize = nullptr;
  decltype(&::nvrtcGetPTX) nvrtcGetPTX = nullptr;
  decltype(&::nvrtcAddNameExpression) nvrtcAddNameExpression = nullptr;
  decltype(&::nvrtcGetLoweredName) nvrtcGetLoweredName = nullptr;
  decltype(&::nvrtcGetNumSupportedArchs) nvrtcGetNumSupportedArchs = nullptr;
  decltype(&::nvrtcGetSupportedArchs) nvrtcGetSupportedArchs = nullptr;
};

struct Loaded {
  NvrtcApi api;
  bool ok = false;
  std::string path;
  std::string why;
  std::string version;
};

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::string(v) : std::string();
}

std::vector<std::string> candidates() {
  std::vector<std::string> c;
  if (auto explicit_path = env("MOETUNE_NVRTC"); !explicit_path.empty()) c.push_back(explicit_path);
  for (const char* n : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}) c.emplace_back(n);
  std::vector<std::string> roots;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    if (auto r = env(var); !r.empty()) roots.push_back(r);
  }
  roots.emplace_back("/usr/local/cuda");
  for (const auto& r : roots) {
    for (const char* lib : {"lib64", "lib", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib"}) {
      for (const char* n : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}) {
        c.push_back(r + "/" + lib + "/" + n);
      }
    }
  }
  return c;
}

Loaded load() {
  Loaded s;
  void* lib = nullptr;
  std::string tried;
  for (const auto& name : candidates()) {
    lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib != nullptr) break;
    if (!tried.empty()) tried += ", ";
    tried += name;
  }
  if (lib == nullptr) {
    s.why = "libnvrtc not found: tried " + tried + " (set CUDA_HOME or MOETUNE_NVRTC)";
    return s;
  }
  link_map* map = nullptr;
  if (dlinfo(lib, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr) {
    s.path = map->l_name;
  }
#define MOETUNE_NVRTC_LOAD(fn)                                      \
  s.api.fn = reinterpret_cast<decltype(s.api.fn)>(dlsym(lib, #fn)); \
  if (s.api.fn == nullptr) {                                        \
    s.why = std::string(#fn) + ": symbol not found in " + s.path;   \
    return s;                                                       \
  }
  MOETUNE_NVRTC_LOAD(nvrtcVersion)
  MOETUNE_NVRTC_LOAD(nvrtcGetErrorString)
  MOETUNE_NVRTC_LOAD(nvrtcCreateProgram)
  MOETUNE_NVRTC_LOAD(nvrtcDestroyProgram)
  MOETUNE_NVRTC_LOAD(nvrtcCompileProgram)
  MOETUNE_NVRTC_LOAD(nvrtcGetProgramLogSize)
  MOETUNE_NVRTC_LOAD(nvrtcGetProgramLog)
  MOETUNE_NVRTC_LOAD(nvrtcGetCUBINSize)
  MOETUNE_NVRTC_LOAD(nvrtcGetCUBIN)
  MOETUNE_NVRTC_LOAD(nvrtcGetPTXSize)
  MOETUNE_NVRTC_LOAD(nvrtcGetPTX)
  MOETUNE_NVRTC_LOAD(nvrtcAddNameExpression)
  MOETUNE_NVRTC_LOAD(nvrtcGetLoweredName)
  MOETUNE_NVRTC_LOAD(nvrtcGetNumSupportedArchs)
  MOETUNE_NVRTC_LOAD(nvrtcGetSupportedArchs)
#undef MOETUNE_NVRTC_LOAD
  int major = 0, minor = 0;
  if (s.api.nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) {
    s.why = "nvrtcVersion failed in " + s.path;
    return s;
  }
  s.version = std::to_string(major) + "." + std::to_string(minor);
  s.ok = true;
  return s;
}

const Loaded& loaded() {
  static const Loaded s = load();
  return s;
}

const NvrtcApi& api() {
  const Loaded& s = loaded();
  if (!s.ok) throw CudaError(s.why);
  return s.api;
}

void check(nvrtcResult r, const char* call) {
  if (r == NVRTC_SUCCESS) return;
  throw CudaError(std::string(call) + ": " + api().nvrtcGetErrorString(r));
}

bool has_cuda_headers(const fs::path& dir) {
  std::error_code ec;
  return fs::exists(dir / "cuda_bf16.h", ec) && fs::exists(dir / "cuda_fp16.h", ec);
}

std::string find_include_dir() {
  std::vector<fs::path> dirs;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    if (auto r = env(var); !r.empty()) dirs.push_back(fs::path(r) / "include");
  }
  dirs.emplace_back("/usr/local/cuda/include");
  const Loaded& s = loaded();
  if (!s.path.empty()) {
    fs::path lib_dir = fs::path(s.path).parent_path();
    dirs.push_back(lib_dir / ".." / "include");
    dirs.push_back(lib_dir / ".." / ".." / "include");  // targets/<triple>/lib -> ../../include
  }
  for (const auto& d : dirs) {
    if (has_cuda_headers(d)) {
      std::error_code ec;
      auto canon = fs::weakly_canonical(d, ec);
      return ec ? d.string() : canon.string();
    }
  }
  return {};
}

}  // namespace

std::string nvrtc_library_path() {
  const Loaded& s = loaded();
  if (!s.ok) throw CudaError(s.why);
  return s.path;
}

std::string nvrtc_version() {
  const Loaded& s = loaded();
  if (!s.ok) throw CudaError(s.why);
  return s.version;
}

std::vector<int> nvrtc_supported_archs() {
  const NvrtcApi& a = api();
  int n = 0;
  check(a.nvrtcGetNumSupportedArchs(&n), "nvrtcGetNumSupportedArchs");
  std::vector<int> archs(static_cast<std::size_t>(std::max(n, 0)));
  if (n > 0) check(a.nvrtcGetSupportedArchs(archs.data()), "nvrtcGetSupportedArchs");
  std::sort(archs.begin(), archs.end());
  return archs;
}

std::string cuda_include_dir() {
  static const std::string dir = find_include_dir();
  return dir;
}

int kernel_knob(const KernelKnob& knob) {
  const std::string v = env(knob.name);
  if (v.empty()) return -1;
  for (int ok : knob.allowed)
    if (ok >= 0 && v == std::to_string(ok)) return ok;
  throw InputError(knob.name, v, std::string("must be ") + knob.values);
}

std::vector<std::string> nvrtc_standard_options(const std::string& arch) {
  std::vector<std::string> opts = {"-std=c++17", "--gpu-architecture=" + arch, "-default-device"};
  for (const KernelKnob& knob : kKernelKnobs)
    if (const int v = kernel_knob(knob); v >= 0)
      opts.push_back(std::string("-D") + knob.name + "=" + std::to_string(v));
  if (auto inc = cuda_include_dir(); !inc.empty()) opts.push_back("-I" + inc);
  return opts;
}

NvrtcResult nvrtc_compile(const NvrtcProgram& program) {
  const NvrtcApi& nv = api();
  std::vector<const char*> header_texts, header_names;
  for (const auto& h : program.headers) {
    header_texts.push_back(h.text.c_str());
    header_names.push_back(h.name.c_str());
  }
  nvrtcProgram prog = nullptr;
  check(nv.nvrtcCreateProgram(&prog, program.source.c_str(), program.name.c_str(),
                              static_cast<int>(header_texts.size()), header_texts.data(),
                              header_names.data()),
        "nvrtcCreateProgram");
  struct Destroy {
    const NvrtcApi& nv;
    nvrtcProgram* p;
    ~Destroy() { nv.nvrtcDestroyProgram(p); }
  } destroy{nv, &prog};

  for (const auto& expr : program.name_expressions) {
    check(nv.nvrtcAddNameExpression(prog, expr.c_str()), "nvrtcAddNameExpression");
  }
  std::vector<std::string> opts = nvrtc_standard_options(program.arch);
  opts.insert(opts.end(), program.options.begin(), program.options.end());
  std::vector<const char*> opt_ptrs;
  for (const auto& o : opts) opt_ptrs.push_back(o.c_str());

  NvrtcResult out;
  nvrtcResult rc = nv.nvrtcCompileProgram(prog, static_cast<int>(opt_ptrs.size()), opt_ptrs.data());
  std::size_t log_size = 0;
  check(nv.nvrtcGetProgramLogSize(prog, &log_size), "nvrtcGetProgramLogSize");
  if (log_size > 1) {
    out.log.resize(log_size);
    check(nv.nvrtcGetProgramLog(prog, out.log.data()), "nvrtcGetProgramLog");
    out.log.resize(log_size - 1);  // drop the terminating NUL
  }
  if (rc == NVRTC_ERROR_COMPILATION) return out;  // ok = false, log says why
  check(rc, "nvrtcCompileProgram");

  std::size_t cubin_size = 0;
  check(nv.nvrtcGetCUBINSize(prog, &cubin_size), "nvrtcGetCUBINSize");
  out.cubin.resize(cubin_size);
  check(nv.nvrtcGetCUBIN(prog, out.cubin.data()), "nvrtcGetCUBIN");
  if (program.want_ptx) {
    std::size_t ptx_size = 0;
    check(nv.nvrtcGetPTXSize(prog, &ptx_size), "nvrtcGetPTXSize");
    out.ptx.resize(ptx_size);
    if (ptx_size > 0) check(nv.nvrtcGetPTX(prog, out.ptx.data()), "nvrtcGetPTX");
    if (!out.ptx.empty() && out.ptx.back() == '\0') out.ptx.pop_back();
  }
  for (const auto& expr : program.name_expressions) {
    const char* lowered = nullptr;
    check(nv.nvrtcGetLoweredName(prog, expr.c_str(), &lowered), "nvrtcGetLoweredName");
    out.lowered_names.emplace_back(lowered);
  }
  out.ok = true;
  return out;
}

}  // namespace moetune::cuda
