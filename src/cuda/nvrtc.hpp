// NVRTC, loaded with dlopen on first use (never linked). Compiles one program to a CUBIN for
// one architecture; the embedded kernels/ sources are its headers, by their relative path.
#pragma once
#include <string>
#include <vector>

namespace moetune::cuda {

struct NvrtcHeader {
  std::string name;  // as written in #include "...", e.g. "common/tile_math.cuh"
  std::string text;
};

struct NvrtcProgram {
  std::string name;  // program name (shows in logs), e.g. the kernel instance name
  std::string source;
  std::vector<NvrtcHeader> headers;
  std::vector<std::string> name_expressions;  // e.g. "moetune::mma_peak<__nv_bfloat16, 4>"
  std::string arch;                           // "sm_80", "sm_90a", ...
  std::vector<std::string> options;           // extra options, after the standard ones
  bool want_ptx = false;                       // also return the PTX (NvrtcResult::ptx)
};

struct NvrtcResult {
  bool ok = false;
  std::vector<char> cubin;
  std::vector<std::string> lowered_names;  // one per name expression, same order
  std::string log;
  std::string ptx;  // the intermediate PTX, with want_ptx only
};

// The library that was loaded, e.g. "/usr/local/cuda/lib64/libnvrtc.so.13"; throws CudaError
// ("libnvrtc not found: tried ...") when none loads.
std::string nvrtc_library_path();
// "13.0". Throws CudaError when NVRTC cannot be loaded.
std::string nvrtc_version();
// The compute capabilities NVRTC can compile for, ascending, e.g. {75, 80, 86, ..., 120, 121}
// (nvrtcGetSupportedArchs). Throws CudaError when NVRTC cannot be loaded.
std::vector<int> nvrtc_supported_archs();
// The CUDA toolkit include directory handed to NVRTC (cuda_bf16.h, cuda_fp8.h), or "" when none
// was found ($CUDA_HOME/include, $CUDA_PATH/include, /usr/local/cuda/include, next to libnvrtc).
std::string cuda_include_dir();
// The environment variables the JIT hands the kernels as defines (-D<name>=<value>), for
// measurements: one binary compiles (and caches, under another key) each form. Each takes the
// values listed; unset or empty, none. MOETUNE_CP_ASYNC_L2_PREFETCH: the L2 prefetch size
// (bytes) of every 16-byte cp.async (kernels/common/ptx.cuh); MOETUNE_SLICED_W2_L2_PREFETCH:
// the sliced kernel's w2 copies' (unset: the first one's); MOETUNE_SLICED_TRACE: 1, the sliced
// kernel stamps each block's progress into a device array (sliced_plan::kTraceSymbol);
// MOETUNE_SLICED_EARLY_W13: 0, the sliced kernel's producer no longer issues its first ring
// units' w13 copies as soon as the derivation knows the expert (unset or 1: it does).
struct KernelKnob {
  const char* name;
  const char* values;  // as the refusal says them
  int allowed[4];      // the values, -1 padded
};
inline constexpr KernelKnob kKernelKnobs[] = {
    {"MOETUNE_CP_ASYNC_L2_PREFETCH", "0, 64, 128 or 256 (bytes)", {0, 64, 128, 256}},
    {"MOETUNE_SLICED_W2_L2_PREFETCH", "0, 64, 128 or 256 (bytes)", {0, 64, 128, 256}},
    {"MOETUNE_SLICED_TRACE", "0 or 1", {0, 1, -1, -1}},
    {"MOETUNE_SLICED_EARLY_W13", "0 or 1", {0, 1, -1, -1}}};
// The knob's value: -1 when unset or empty. Throws InputError naming the variable unless it is
// one of knob.allowed.
int kernel_knob(const KernelKnob& knob);
// The options every compile gets: -std=c++17, --gpu-architecture=<arch>, -default-device,
// -D<name>=<value> for each kKernelKnobs set (plus -I<cuda_include_dir()> when known, which is
// not part of any cache key).
std::vector<std::string> nvrtc_standard_options(const std::string& arch);

// Compiles; a compile error is returned (ok=false with the log), an NVRTC failure to run at all
// (library missing, bad arch option) throws CudaError naming the call.
NvrtcResult nvrtc_compile(const NvrtcProgram& program);

}  // namespace moetune::cuda
