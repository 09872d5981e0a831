// Jit: per-process map in front of the disk cache in front of NVRTC; module loading per context.
#include "cuda/jit.hpp"

#include <algorithm>
#include <chrono>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "cuda/context.hpp"
#include "cuda/driver.hpp"
#include "cuda/hash.hpp"
#include "cuda/jit_cache.hpp"
#include "cuda/kernel_sources.hpp"
#include "cuda/nvrtc.hpp"
#include "moetune/error.hpp"

namespace moetune::cuda {
namespace {

// NVRTC's options that change the binary, without the machine-specific -I path.
std::vector<std::string> keyed_options(const KernelSpec& spec) {
  std::vector<std::string> opts;
  for (const auto& o : nvrtc_standard_options(spec.arch)) {
    if (o.rfind("-I", 0) != 0) opts.push_back(o);
  }
  opts.insert(opts.end(), spec.options.begin(), spec.options.end());
  return opts;
}

const std::vector<NvrtcHeader>& embedded_headers() {
  static const std::vector<NvrtcHeader> headers = [] {
    std::vector<NvrtcHeader> h;
    for (const auto& src : kernel_sources()) {
      h.push_back({std::string(src.path), std::string(src.text)});
    }
    return h;
  }();
  return headers;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::mutex handler_mu;
CacheWriteFailureHandler& handler() {
  static CacheWriteFailureHandler h;
  return h;
}

}  // namespace

CacheWriteFailureHandler set_cache_write_failure_handler(CacheWriteFailureHandler h) {
  std::lock_guard lock(handler_mu);
  std::swap(handler(), h);
  return h;
}

std::string KernelSpec::name_expression() const {
  std::string e = kernel;
  if (template_args.empty()) return e;
  e += "<";
  for (std::size_t i = 0; i < template_args.size(); ++i) {
    if (i > 0) e += ", ";
    e += template_args[i].second;
  }
  e += ">";
  return e;
}

std::string KernelSpec::cache_key() const {
  std::string text = "moetune-jit-key-1\n";
  text += "source=" + std::string(kernel_source_hash()) + "\n";
  text += "file=" + file + "\n";
  text += "arch=" + arch + "\n";
  text += "nvrtc=" + nvrtc_version() + "\n";
  for (const auto& o : keyed_options(*this)) text += "option=" + o + "\n";
  text += "expr=" + name_expression() + "\n";
  return sha256_hex(text);
}

std::string KernelSpec::generated_source() const {
  std::string s = "// moetune JIT instance " + (name.empty() ? kernel : name) + "\n";
  s += "// " + kernel + "<\n";
  for (std::size_t i = 0; i < template_args.size(); ++i) {
    s += "//   /*" + template_args[i].first + "*/ " + template_args[i].second +
         (i + 1 < template_args.size() ? ",\n" : "\n");
  }
  s += "// >\n#include \"" + file + "\"\n";
  return s;
}

namespace {
// The NVRTC program of one kernel instance (its generated source and the embedded headers).
NvrtcProgram nvrtc_program(const KernelSpec& spec) {
  NvrtcProgram prog;
  prog.name = (spec.name.empty() ? "moetune_kernel" : spec.name) + ".cu";
  prog.source = spec.generated_source();
  prog.headers = embedded_headers();
  prog.name_expressions = {spec.name_expression()};
  prog.arch = spec.arch;
  prog.options = spec.options;
  return prog;
}
}  // namespace

std::string kernel_ptx(const KernelSpec& spec) {
  NvrtcProgram prog = nvrtc_program(spec);
  prog.want_ptx = true;
  NvrtcResult r = nvrtc_compile(prog);
  if (!r.ok) {
    throw CudaError("NVRTC failed to compile " + spec.name_expression() + " for " + spec.arch +
                    " (" + spec.file + "):\n" + r.log);
  }
  return r.ptx;
}

// ---------------------------------------------------------------------------------------------

LoadedKernel::LoadedKernel(CUmodule module, CUfunction fn, std::string name)
    : module_(module), fn_(fn), name_(std::move(name)) {}

LoadedKernel::~LoadedKernel() {
  if (module_ != nullptr) driver().cuModuleUnload(module_);  // no throw from a destructor
}

namespace {
int func_attr(CUfunction fn, CUfunction_attribute a) {
  int v = 0;
  MOETUNE_CU(cuFuncGetAttribute, &v, a, fn);
  return v;
}
}  // namespace

int LoadedKernel::num_regs() const { return func_attr(fn_, CU_FUNC_ATTRIBUTE_NUM_REGS); }
int LoadedKernel::local_bytes() const { return func_attr(fn_, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES); }
int LoadedKernel::static_smem_bytes() const {
  return func_attr(fn_, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
}
int LoadedKernel::max_threads_per_block() const {
  return func_attr(fn_, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
}

std::pair<CUdeviceptr, std::size_t> LoadedKernel::global(const char* symbol) const {
  CUdeviceptr p = 0;
  std::size_t bytes = 0;
  MOETUNE_CU(cuModuleGetGlobal, &p, &bytes, module_, symbol);
  return {p, bytes};
}

int LoadedKernel::max_active_blocks_per_sm(int threads, std::size_t smem_bytes) const {
  if (smem_bytes > 48 * 1024 && smem_bytes > smem_set_.load()) {
    MOETUNE_CU(cuFuncSetAttribute, fn_, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
               static_cast<int>(smem_bytes));
    smem_set_.store(smem_bytes);
  }
  int blocks = 0;
  MOETUNE_CU(cuOccupancyMaxActiveBlocksPerMultiprocessor, &blocks, fn_, threads, smem_bytes);
  return blocks;
}

LaunchAttributes launch_attributes(const LaunchOptions& opts, int driver_version,
                                   bool has_launch_ex) {
  LaunchAttributes out;
  if (opts.pdl && has_launch_ex && driver_version >= kPdlMinDriverVersion) {
    CUlaunchAttribute& a = out.attrs[out.count++];
    a.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    a.value.programmaticStreamSerializationAllowed = 1;
  }
  if (opts.cluster_x > 1) {
    if (!has_launch_ex)
      throw CudaError("cuLaunchKernelEx: not in this driver (a cluster launch needs it)");
    CUlaunchAttribute& a = out.attrs[out.count++];
    a.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    a.value.clusterDim.x = opts.cluster_x;
    a.value.clusterDim.y = 1;
    a.value.clusterDim.z = 1;
  }
  return out;
}

namespace {
// This driver's version, once (0 when it cannot say: no PDL then).
int driver_version() {
  static const int v = [] {
    int out = 0;
    const auto& api = driver();
    if (api.cuDriverGetVersion == nullptr || api.cuDriverGetVersion(&out) != CUDA_SUCCESS) out = 0;
    return out;
  }();
  return v;
}
}  // namespace

void LoadedKernel::launch(Dim3 grid, Dim3 block, std::size_t smem_bytes, CUstream stream,
                          void** args, LaunchOptions opts) const {
  if (smem_bytes > 48 * 1024 && smem_bytes > smem_set_.load()) {
    MOETUNE_CU(cuFuncSetAttribute, fn_, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
               static_cast<int>(smem_bytes));
    smem_set_.store(smem_bytes);
  }
  if (opts.pdl || opts.cluster_x > 1) {
    const auto& api = driver();
    LaunchAttributes attrs =
        launch_attributes(opts, driver_version(), api.cuLaunchKernelEx != nullptr);
    if (attrs.count > 0) {
      CUlaunchConfig cfg{};
      cfg.gridDimX = grid.x;
      cfg.gridDimY = grid.y;
      cfg.gridDimZ = grid.z;
      cfg.blockDimX = block.x;
      cfg.blockDimY = block.y;
      cfg.blockDimZ = block.z;
      cfg.sharedMemBytes = static_cast<unsigned>(smem_bytes);
      cfg.hStream = stream;
      cfg.attrs = attrs.attrs;
      cfg.numAttrs = attrs.count;
      MOETUNE_CU(cuLaunchKernelEx, &cfg, fn_, args, nullptr);
      return;
    }
  }
  MOETUNE_CU(cuLaunchKernel, fn_, grid.x, grid.y, grid.z, block.x, block.y, block.z,
             static_cast<unsigned>(smem_bytes), stream, args, nullptr);
}

// ---------------------------------------------------------------------------------------------

struct Jit::State {
  DiskCache disk;
  mutable std::mutex mu;
  std::map<std::string, std::shared_future<CompiledKernel>> compiled;  // key -> result
  std::map<std::pair<std::string, CUcontext>, std::shared_ptr<LoadedKernel>> loaded;
  Stats stats;
  bool write_failure_told = false;  // the handler hears of the first failed write only
  explicit State(std::string dir) : disk(std::move(dir)) {}
};

Jit::Jit(std::string cache_dir) : state_(std::make_unique<State>(std::move(cache_dir))) {
  state_->disk.remove_stale_temps();  // a writer that died mid-write left its temp file
}
Jit::~Jit() = default;

Jit& Jit::instance() {
  static Jit* jit = new Jit(default_cache_dir());  // never destroyed: modules outlive statics
  return *jit;
}

std::string Jit::cache_dir() const { return state_->disk.dir(); }
std::string Jit::nvrtc_version() const { return cuda::nvrtc_version(); }

Jit::Stats Jit::stats() const {
  std::lock_guard lock(state_->mu);
  return state_->stats;
}

void Jit::clear_memory() {
  std::lock_guard lock(state_->mu);
  state_->compiled.clear();
}

CompiledKernel Jit::compile(const KernelSpec& spec) {
  auto t0 = std::chrono::steady_clock::now();
  if (spec.arch.empty()) throw InputError("arch", "", "no target architecture for " + spec.name);
  if (spec.file.empty() || spec.kernel.empty()) {
    throw InputError("kernel", spec.kernel, "a KernelSpec needs file and kernel");
  }
  const std::string key = spec.cache_key();

  // One compile per key per process: later callers wait on the first one's future.
  std::promise<CompiledKernel> promise;
  {
    std::unique_lock lock(state_->mu);
    auto it = state_->compiled.find(key);
    if (it != state_->compiled.end()) {
      auto fut = it->second;
      ++state_->stats.memory_hits;
      lock.unlock();
      CompiledKernel hit = fut.get();  // rethrows the first caller's failure
      hit.spec = spec;
      hit.from_cache = true;
      hit.compile_s = seconds_since(t0);
      return hit;
    }
    state_->compiled.emplace(key, promise.get_future().share());
  }

  try {
    CompiledKernel out;
    out.spec = spec;
    if (auto entry = state_->disk.read(key)) {
      out.cubin = std::move(entry->cubin);
      out.lowered_name = std::move(entry->lowered_name);
      out.from_cache = true;
      std::lock_guard lock(state_->mu);
      ++state_->stats.disk_hits;
    } else {
      NvrtcProgram prog = nvrtc_program(spec);
      NvrtcResult r = nvrtc_compile(prog);
      {
        std::lock_guard lock(state_->mu);
        ++state_->stats.nvrtc_compiles;
      }
      if (!r.ok) {
        throw CudaError("NVRTC failed to compile " + spec.name_expression() + " for " + spec.arch +
                        " (" + spec.file + "):\n" + r.log);
      }
      out.cubin = std::move(r.cubin);
      out.lowered_name = r.lowered_names.at(0);
      out.log = std::move(r.log);
      std::string why;
      if (!state_->disk.write(key, {out.cubin, out.lowered_name}, &why)) {  // costs time only
        tell_write_failure(why);
      }
    }
    out.compile_s = seconds_since(t0);
    promise.set_value(out);
    return out;
  } catch (...) {
    promise.set_exception(std::current_exception());
    std::lock_guard lock(state_->mu);
    state_->compiled.erase(key);  // a later call may try again
    throw;
  }
}

void Jit::tell_write_failure(const std::string& why) {
  {
    std::lock_guard lock(state_->mu);
    if (std::exchange(state_->write_failure_told, true)) return;
  }
  CacheWriteFailureHandler h;
  {
    std::lock_guard lock(handler_mu);
    h = handler();
  }
  if (h) h(state_->disk.dir(), why);  // outside the locks: the handler may take its time
}

std::vector<CompiledKernel> Jit::compile_many(const std::vector<KernelSpec>& specs, int threads) {
  std::vector<CompiledKernel> results(specs.size());
  if (specs.empty()) return results;
  int n =
      threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  n = std::min<int>(n, static_cast<int>(specs.size()));
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i = next++; i < specs.size(); i = next++) {
      try {
        results[i] = compile(specs[i]);
      } catch (const std::exception& e) {
        results[i] = CompiledKernel{};
        results[i].spec = specs[i];
        results[i].log = e.what();
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < n; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  return results;
}

std::future<std::vector<CompiledKernel>> Jit::compile_many_async(std::vector<KernelSpec> specs,
                                                                int threads) {
  return std::async(std::launch::async, [this, specs = std::move(specs), threads] {
    return compile_many(specs, threads);
  });
}

std::shared_ptr<LoadedKernel> Jit::get(const KernelSpec& spec_in) {
  Context& ctx = Context::current();
  KernelSpec spec = spec_in;
  if (spec.arch.empty()) {
    static std::mutex arch_mu;
    static std::map<int, std::string> arch_of;  // ordinal -> NVRTC arch, queried once
    std::lock_guard lock(arch_mu);
    auto it = arch_of.find(ctx.ordinal());
    if (it == arch_of.end())
      it = arch_of.emplace(ctx.ordinal(), query_device(ctx.ordinal()).arch()).first;
    spec.arch = it->second;
  }
  const std::string key = spec.cache_key();
  {
    std::lock_guard lock(state_->mu);
    auto it = state_->loaded.find({key, ctx.handle()});
    if (it != state_->loaded.end()) return it->second;
  }
  CompiledKernel ck = compile(spec);
  CUmodule module = nullptr;
  MOETUNE_CU(cuModuleLoadData, &module, ck.cubin.data());
  CUfunction fn = nullptr;
  CUresult r = driver().cuModuleGetFunction(&fn, module, ck.lowered_name.c_str());
  if (r != CUDA_SUCCESS) {
    driver().cuModuleUnload(module);
    check(r, "cuModuleGetFunction");
  }
  auto kernel =
      std::make_shared<LoadedKernel>(module, fn, spec.name.empty() ? ck.lowered_name : spec.name);
  std::lock_guard lock(state_->mu);
  auto [it, inserted] = state_->loaded.emplace(std::make_pair(key, ctx.handle()), kernel);
  return it->second;  // a concurrent loader may have won; its module is kept, ours unloads
}

}  // namespace moetune::cuda
