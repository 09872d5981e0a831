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

// How LoadedKernel::launch enqueues a kernel.
struct LaunchOptions {
  // Programmatic dependent launch (sm_90+): cuLaunchKernelEx with
  // CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 1, so the kernel's blocks may be
  // scheduled while the previous kernel of the stream finishes. The kernel must pdl_wait()
  // (kernels/common/pdl.cuh) before touching what earlier work wrote or reads. Between a kernel
  // and a non-kernel operation (a memset, an event) the edge is an ordinary full dependency.
  // Stream capture keeps it as a programmatic graph edge.
  bool pdl = false;
  // Thread-block clusters of cluster_x blocks along x (sm_90+; the grid a multiple of it):
  // CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION through cuLaunchKernelEx. 1: none.
  unsigned cluster_x = 1;
};

// The oldest driver (cuDriverGetVersion) that gets PDL launches: CUDA 12.3, whose graphs keep
// programmatic edges from stream capture (12.0's cuLaunchKernelEx alone is not enough).
inline constexpr int kPdlMinDriverVersion = 12030;

// The launch attributes LoadedKernel::launch passes to cuLaunchKernelEx for `opts` on a driver of
// `driver_version` that has (`has_launch_ex`) cuLaunchKernelEx. count 0: the plain cuLaunchKernel
// (no PDL asked, or the driver cannot: older than kPdlMinDriverVersion or no cuLaunchKernelEx;
// and no cluster). A cluster without cuLaunchKernelEx throws CudaError. Pure otherwise: no
// driver call, no allocation.
struct LaunchAttributes {
  CUlaunchAttribute attrs[2] = {};
  unsigned count = 0;
};
LaunchAttributes launch_attributes(const LaunchOptions& opts, int driver_version,
                                   bool has_launch_ex);

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
  // The device address and size (bytes) of the module's global `symbol` (an extern "C"
  // __device__ variable, e.g. a trace build's stamps); throws CudaError when it has none.
  std::pair<CUdeviceptr, std::size_t> global(const char* symbol) const;
  // Resident blocks per SM for this block size and dynamic shared memory (occupancy).
  int max_active_blocks_per_sm(int threads, std::size_t smem_bytes) const;
  // Sets CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES once if smem_bytes > 48 KiB.
  // opts.pdl: a programmatic dependent launch where the driver supports it
  // (launch_attributes), else the plain launch.
  void launch(Dim3 grid, Dim3 block, std::size_t smem_bytes, CUstream stream, void** args,
              LaunchOptions opts = {}) const;

 private:
  CUmodule module_;
  CUfunction fn_;
  std::string name_;
  mutable std::atomic<std::size_t> smem_set_{0};
};

// The PTX of one instance (NVRTC, no cache, no GPU): for inspecting what a kernel compiles to
// on spec.arch (e.g. that sm_90a has griddepcontrol.wait and sm_80 not). Throws CudaError with
// the NVRTC log on a compile error.
std::string kernel_ptx(const KernelSpec& spec);

// Told when a compiled kernel cannot be written to a Jit's disk cache: the folder and why. That
// is no error (compile() goes on; the next run compiles again), but a cache that never fills
// should not pass unseen, and the library prints nothing: the CLI sets a handler that prints a
// note. Each Jit calls it at most once, from whichever compile thread failed first.
using CacheWriteFailureHandler =
    std::function<void(const std::string& dir, const std::string& reason)>;
// Sets the process-wide handler (none by default); returns the previous one. Thread-safe.
CacheWriteFailureHandler set_cache_write_failure_handler(CacheWriteFailureHandler handler);

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
  void tell_write_failure(const std::string& why);
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace moetune::cuda
