// Primary contexts, one per device ordinal, and the device query. One tuner worker per GPU
// calls Context::get(its ordinal) on its own thread.
#pragma once
#include <cuda.h>

#include <cstddef>
#include <string>

namespace moetune::cuda {

class Context {
 public:
  // The primary context of device `ordinal`, retained once per process and made current on the
  // calling thread. Throws GpuUnavailable without a driver/device, InputError for a bad ordinal.
  static Context& get(int ordinal = 0);
  // The context current on this thread; if none, device 0's primary context (made current).
  static Context& current();
  void make_current() const;
  CUcontext handle() const { return ctx_; }
  CUdevice device() const { return device_; }
  int ordinal() const { return ordinal_; }
  void synchronize() const;

  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

 private:
  Context(int ordinal, CUdevice device, CUcontext ctx)
      : ordinal_(ordinal), device_(device), ctx_(ctx) {}
  int ordinal_;
  CUdevice device_;
  CUcontext ctx_;
};

// Pushes a context for a scope and pops it after (RAII), leaving the thread's current context as
// it was.
class ScopedContext {
 public:
  explicit ScopedContext(const Context& ctx);
  ~ScopedContext();
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;
};

struct DeviceInfo {
  int ordinal = 0;
  std::string name;  // e.g. "NVIDIA H200"
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int smem_per_block_optin_bytes = 0;  // max dynamic shared memory per block (opt-in)
  int smem_per_sm_bytes = 0;
  int l2_bytes = 0;
  int max_threads_per_block = 0;
  int clock_khz = 0;  // peak SM clock the driver reports
  int memory_clock_khz = 0;
  int memory_bus_bits = 0;
  std::size_t memory_bytes = 0;
  std::string pci_bus_id;                     // e.g. "0000:19:00.0"
  int driver_version = 0;                     // CUDA_VERSION style, e.g. 13000
  std::string driver_version_string() const;  // "13.0"
  std::string arch() const;                   // NVRTC target: "sm_90a", "sm_100a", else "sm_<cc>"
};

int device_count();  // throws GpuUnavailable without a driver
DeviceInfo query_device(int ordinal = 0);

}  // namespace moetune::cuda
