// NVRTC JIT with an on-disk cubin cache. Knows nothing of MoE: it compiles a named template
// instance from the embedded kernels/ sources for one architecture, caches the cubin, and loads it.
#pragma once
#include <cuda.h>  // types only; libcuda is dlopen()ed (driver.hpp)

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace moetune::cuda {

// One kernel instance: `kernel` is a template in `file` (relative to kernels/), instantiated with
// `template_args` in order. Each arg has a name for readable generated code and instance names.
struct KernelSpec {
  std::string file;                                                // e.g. "moe_gemm_mma.cuh"
  std::string kernel;                                              // e.g. "moetune::moe_gemm_mma"
  std::vector<std::pair<std::string, std::string>> template_args;  // {"BLOCK_SIZE_M","64"}, ...
  std::string arch;                                                // e.g. "sm_90a"
  std::string name;  // instance name carrying its config, e.g. moe_gemm1_bf16_m64n128k64_g8_w4_s3
  std::vector<std::string> options;  // extra NVRTC options (e.g. "-DMOETUNE_X=1", "-lineinfo")

  // Kernels include each other by their path relative to kernels/ ("common/tile_math.cuh"),
  // also from inside kernels/common/. The CUDA headers (cuda_bf16.h, cuda_fp8.h) come from the
  // toolkit include directory found at run time (cuda/nvrtc.hpp).

  // The NVRTC name expression: kernel<arg0, arg1, ...>.
  std::string name_expression() const;
  // The cache key: hash of kernel source hash, arch, NVRTC version, options and the expression.
  // Loads NVRTC (for its version): throws CudaError when it cannot be loaded.
  std::string cache_key() const;
  // The generated NVRTC program: includes `file`, lists the template arguments by name.
  std::string generated_source() const;
};

// A compiled instance: cubin bytes and the lowered (mangled) name. No GPU needed to produce it.
struct CompiledKernel {
  KernelSpec spec;
  std::vector<char> cubin;
  std::string lowered_name;
  std::string log;  // NVRTC log (warnings)
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
  int local_bytes() const;  // per-thread local memory (spills, stack arrays)
  int static_smem_bytes() const;
  int max_threads_per_block() const;
  // Resident blocks per SM for this block size and dynamic shared memory (occupancy).
  int max_active_blocks_per_sm(int threads, std::size_t smem_bytes) const;
  // Sets CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES once if smem_bytes > 48 KiB.
  void launch(Dim3 grid, Dim3 block, std::size_t smem_bytes, CUstream stream, void** args) const;

 private:
  CUmodule module_;
  CUfunction fn_;
  std::string name_;
  mutable std::atomic<std::size_t> smem_set_{0};
};

class Jit {
 public:
  // The process-wide instance. Cache directory: $MOETUNE_CACHE_DIR, else
  // $XDG_CACHE_HOME/moetune, else ~/.cache/moetune, else /tmp/moetune-cache-<uid>.
  static Jit& instance();
  // An instance of its own over `cache_dir` (tests; a tool with --cache-dir).
  explicit Jit(std::string cache_dir);
  ~Jit();
  Jit(const Jit&) = delete;
  Jit& operator=(const Jit&) = delete;
  // Compiles (or reads from the disk cache). Thread-safe. Throws CudaError with the NVRTC log.
  CompiledKernel compile(const KernelSpec& spec);
  // Compiles many on a thread pool of `threads` (0 = hardware concurrency). Results in order;
  // a failure is returned as an empty cubin with the log, not thrown.
  std::vector<CompiledKernel> compile_many(const std::vector<KernelSpec>& specs, int threads = 0);
  // compile_many on a background thread, so that compiles overlap GPU measurement.
  std::future<std::vector<CompiledKernel>> compile_many_async(std::vector<KernelSpec> specs,
                                                              int threads = 0);
  // Compile if needed and load into the current context (memoized per process). Needs a GPU.
  // An empty spec.arch means the current device's arch.
  std::shared_ptr<LoadedKernel> get(const KernelSpec& spec);
  std::string cache_dir() const;
  std::string nvrtc_version() const;  // e.g. "13.0"

  // Counters (this instance): compiles by NVRTC, disk-cache hits, in-memory hits.
  struct Stats {
    int nvrtc_compiles = 0, disk_hits = 0, memory_hits = 0;
  };
  Stats stats() const;
  // Forgets the in-memory map (the disk cache stays): the next compile reads the disk.
  void clear_memory();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace moetune::cuda
