// dlopen of libcuda.so.1, symbol table, cuInit, and the one error checker.
#include "cuda/driver.hpp"

#include <dlfcn.h>

#include <mutex>
#include <string>

#include "moetune/error.hpp"

namespace moetune::cuda {
namespace {

#define MOETUNE_STR2(x) #x
#define MOETUNE_STR(x) MOETUNE_STR2(x)

struct LoadState {
  DriverApi api;
  bool ok = false;
  std::string why;  // one line, when !ok
};

LoadState load() {
  LoadState s;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    s.why = "no NVIDIA driver: libcuda.so.1 not found";
    return s;
  }
  // MOETUNE_STR expands the macro first: cuMemAlloc resolves "cuMemAlloc_v2", as cuda.h maps it.
#define MOETUNE_DRIVER_LOAD(name) \
  s.api.name = reinterpret_cast<decltype(s.api.name)>(dlsym(lib, MOETUNE_STR(name)));
  MOETUNE_DRIVER_FUNCTIONS(MOETUNE_DRIVER_LOAD)
#undef MOETUNE_DRIVER_LOAD
  if (s.api.cuInit == nullptr) {
    s.why = "NVIDIA driver unusable: libcuda.so.1 has no cuInit";
    return s;
  }
  CUresult r = s.api.cuInit(0);
  if (r != CUDA_SUCCESS) {
    const char* name = nullptr;
    if (s.api.cuGetErrorName != nullptr) s.api.cuGetErrorName(r, &name);
    s.why = std::string("no usable GPU: cuInit failed (") + (name ? name : "error") + " " +
            std::to_string(static_cast<int>(r)) + ")";
    return s;
  }
  s.ok = true;
  return s;
}

const LoadState& state() {
  static const LoadState s = load();  // thread-safe, once; the library stays loaded
  return s;
}

}  // namespace

const DriverApi& driver() {
  const LoadState& s = state();
  if (!s.ok) throw GpuUnavailable(s.why);
  return s.api;
}

bool gpu_available(std::string* why) {
  const LoadState& s = state();
  if (!s.ok) {
    if (why != nullptr) *why = s.why;
    return false;
  }
  int count = 0;
  CUresult r = s.api.cuDeviceGetCount ? s.api.cuDeviceGetCount(&count) : CUDA_ERROR_NOT_FOUND;
  if (r != CUDA_SUCCESS || count == 0) {
    if (why != nullptr) *why = "no CUDA device found";
    return false;
  }
  return true;
}

void require_gpu() {
  std::string why;
  if (!gpu_available(&why)) throw GpuUnavailable(why);
}

void check(CUresult r, const char* call) {
  if (r == CUDA_SUCCESS) return;
  const char* name = nullptr;
  const char* text = nullptr;
  const LoadState& s = state();
  if (s.api.cuGetErrorName != nullptr) s.api.cuGetErrorName(r, &name);
  if (s.api.cuGetErrorString != nullptr) s.api.cuGetErrorString(r, &text);
  std::string msg = std::string(call) + ": " +
                    (name ? name : "CUDA error " + std::to_string(static_cast<int>(r)));
  if (text != nullptr) msg += std::string(" (") + text + ")";
  throw CudaError(msg);
}

void require_symbol(const void* fn, const char* call) {
  if (fn == nullptr) {
    throw CudaError(std::string(call) + ": symbol not found in libcuda.so.1 (driver too old)");
  }
}

}  // namespace moetune::cuda
