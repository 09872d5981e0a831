// Primary-context holder per ordinal and the device attribute query.
#include "cuda/context.hpp"

#include <map>
#include <memory>
#include <mutex>

#include "cuda/driver.hpp"
#include "moetune/error.hpp"

namespace moetune::cuda {

Context& Context::get(int ordinal) {
  static std::mutex mu;
  static auto* contexts = new std::map<int, std::unique_ptr<Context>>();  // lives to exit
  std::unique_lock lock(mu);
  auto it = contexts->find(ordinal);
  if (it == contexts->end()) {
    int count = device_count();
    if (ordinal < 0 || ordinal >= count) {
      throw InputError("device", std::to_string(ordinal),
                       "no such CUDA device (" + std::to_string(count) + " present)");
    }
    CUdevice dev = 0;
    MOETUNE_CU(cuDeviceGet, &dev, ordinal);
    CUcontext ctx = nullptr;
    MOETUNE_CU(cuDevicePrimaryCtxRetain, &ctx, dev);
    it = contexts->emplace(ordinal, std::unique_ptr<Context>(new Context(ordinal, dev, ctx))).first;
  }
  lock.unlock();
  it->second->make_current();
  return *it->second;
}

Context& Context::current() {
  CUcontext cur = nullptr;
  MOETUNE_CU(cuCtxGetCurrent, &cur);
  if (cur != nullptr) {
    CUdevice dev = 0;
    MOETUNE_CU(cuCtxGetDevice, &dev);
    // Ordinals and CUdevice handles coincide in the driver API (cuDeviceGet(&d, i) gives d == i).
    Context& ctx = get(static_cast<int>(dev));
    if (ctx.handle() == cur) return ctx;
  }
  return get(0);
}

void Context::make_current() const { MOETUNE_CU(cuCtxSetCurrent, ctx_); }

void Context::synchronize() const {
  ScopedContext scope(*this);
  MOETUNE_CU(cuCtxSynchronize);
}

ScopedContext::ScopedContext(const Context& ctx) { MOETUNE_CU(cuCtxPushCurrent, ctx.handle()); }

ScopedContext::~ScopedContext() {
  CUcontext popped = nullptr;
  driver().cuCtxPopCurrent(&popped);  // a destructor must not throw
}

int device_count() {
  int count = 0;
  MOETUNE_CU(cuDeviceGetCount, &count);
  return count;
}

std::string DeviceInfo::driver_version_string() const {
  return std::to_string(driver_version / 1000) + "." + std::to_string(driver_version % 1000 / 10);
}

std::string DeviceInfo::arch() const {
  int cc = cc_major * 10 + cc_minor;
  if (cc == 90 || cc == 100 || cc == 103) return "sm_" + std::to_string(cc) + "a";
  return "sm_" + std::to_string(cc);
}

DeviceInfo query_device(int ordinal) {
  int count = device_count();
  if (ordinal < 0 || ordinal >= count) {
    throw InputError("device", std::to_string(ordinal),
                     "no such CUDA device (" + std::to_string(count) + " present)");
  }
  CUdevice dev = 0;
  MOETUNE_CU(cuDeviceGet, &dev, ordinal);
  DeviceInfo info;
  info.ordinal = ordinal;
  char name[256] = {};
  MOETUNE_CU(cuDeviceGetName, name, static_cast<int>(sizeof(name)) - 1, dev);
  info.name = name;
  auto attr = [&](CUdevice_attribute a) {
    int v = 0;
    MOETUNE_CU(cuDeviceGetAttribute, &v, a, dev);
    return v;
  };
  info.cc_major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  info.cc_minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  info.sm_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  info.smem_per_block_optin_bytes = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  info.smem_per_sm_bytes = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
  info.l2_bytes = attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
  info.max_threads_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  info.clock_khz = attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
  info.memory_clock_khz = attr(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
  info.memory_bus_bits = attr(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
  std::size_t mem = 0;
  MOETUNE_CU(cuDeviceTotalMem, &mem, dev);
  info.memory_bytes = mem;
  char bus[64] = {};
  MOETUNE_CU(cuDeviceGetPCIBusId, bus, static_cast<int>(sizeof(bus)) - 1, dev);
  info.pci_bus_id = bus;
  MOETUNE_CU(cuDriverGetVersion, &info.driver_version);
  return info;
}

}  // namespace moetune::cuda
