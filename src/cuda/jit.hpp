// NVRTC JIT with an on-disk cubin cache. Knows nothing of MoE: it compiles a named template
// instance from the embedded kernels/ sources for one architecture, caches the cubin, and loads it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <cuda.h>  // types only; libcuda is dlopen()ed (driver.hpp)

namespace moetune::cuda {

// One kernel instance: `kernel` is a template in `file` (relative to kernels/), instantiated with
// `template_args` in order. Each arg has a name for readable generated code and instance names.
struct KernelSpec {
  std::string file;                                            // e.g. "moe_gemm_mma.cuh"
  std::string kernel;                                          // e.g. "moetune::moe_gemm_mma"
  std::vector<std::pair<std::string, std::string>> template_args;  // {"BLOCK_SIZE_M","64"}, ...
  std::string arch;                                            // e.g. "sm_90a"
  std::string name;  // instance name carrying its config, e.g. moe_gemm1_bf16_m64n128k64_g8_w4_s3

  // The NVRTC name expression: kernel<arg0, arg1, ...>.
  std::string name_expression() const;
  // The cache key: hash of kernel source hash, arch, NVRTC version, options and the expression.
  std::string cache_key() const;
};

// A compiled instance: cubin bytes and the lowered (mangled) name. No GPU needed to produce it.
struct CompiledKernel {
  KernelSpec spec;
  std::vector<char> cubin;
  std::string lowered_name;
  std::string log;         // NVRTC log (warnings)
  bool from_cache = false;
  double compile_s = 0;
};

// Launch geometry (cuda.h has no dim3).
struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

// A kernel loaded into the current context.
class LoadedKernel {
 public:
  LoadedKernel(CUmodule module, CUfunction fn, std::string name);
  ~LoadedKernel();
  LoadedKernel(const LoadedKernel&) = delete;
  LoadedKernel& operator=(const LoadedKernel&) = delete;
  CUfunction function() const { return fn_; }
  const std::string& name() const { return name_; }
  int num_regs() const;
  // Sets CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES once if smem_bytes > 48 KiB.
  void launch(Dim3 grid, Dim3 block, std::size_t smem_bytes, CUstream stream, void** args) const;

 private:
  CUmodule module_;
  CUfunction fn_;
  std::string name_;
  mutable std::size_t smem_set_ = 0;
};

class Jit {
 public:
  // Cache directory: $MOETUNE_CACHE_DIR, else $XDG_CACHE_HOME/moetune, else ~/.cache/moetune.
  static Jit& instance();
  // Compiles (or reads from the disk cache). Thread-safe. Throws CudaError with the NVRTC log.
  CompiledKernel compile(const KernelSpec& spec);
  // Compiles many on a thread pool of `threads` (0 = hardware concurrency). Results in order;
  // a failure is returned as an empty cubin with the log, not thrown.
  std::vector<CompiledKernel> compile_many(const std::vector<KernelSpec>& specs, int threads = 0);
  // Compile if needed and load into the current context (memoized per process). Needs a GPU.
  std::shared_ptr<LoadedKernel> get(const KernelSpec& spec);
  std::string cache_dir() const;
  std::string nvrtc_version() const;  // e.g. "13.0"
};

}  // namespace moetune::cuda
