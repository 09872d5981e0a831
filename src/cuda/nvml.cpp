// Minimal NVML binding: the few entry points moetune reads, declared here (the toolkit ships no
// nvml.h), resolved with dlsym.
#include "cuda/nvml.hpp"

#include <dlfcn.h>

#include <map>
#include <mutex>

namespace moetune::cuda {
namespace {

using NvmlReturn = int;          // nvmlReturn_t; 0 = NVML_SUCCESS
using NvmlDevice = void*;        // nvmlDevice_t
constexpr int kNvmlClockSm = 1;  // NVML_CLOCK_SM

struct NvmlApi {
  NvmlReturn (*init)() = nullptr;                                 // nvmlInit_v2
  NvmlReturn (*driver_version)(char*, unsigned) = nullptr;        // nvmlSystemGetDriverVersion
  NvmlReturn (*by_pci)(const char*, NvmlDevice*) = nullptr;       // ..HandleByPciBusId_v2
  NvmlReturn (*clock)(NvmlDevice, int, unsigned*) = nullptr;      // nvmlDeviceGetClockInfo
  NvmlReturn (*max_clock)(NvmlDevice, int, unsigned*) = nullptr;  // ..GetMaxClockInfo
  NvmlReturn (*default_app_clock)(NvmlDevice, int,
                                  unsigned*) = nullptr;  // ..DefaultApplicationsClock
  bool ok = false;
};

NvmlApi load() {
  NvmlApi a;
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return a;
  auto sym = [&](const char* n) { return dlsym(lib, n); };
  a.init = reinterpret_cast<decltype(a.init)>(sym("nvmlInit_v2"));
  a.driver_version =
      reinterpret_cast<decltype(a.driver_version)>(sym("nvmlSystemGetDriverVersion"));
  a.by_pci = reinterpret_cast<decltype(a.by_pci)>(sym("nvmlDeviceGetHandleByPciBusId_v2"));
  a.clock = reinterpret_cast<decltype(a.clock)>(sym("nvmlDeviceGetClockInfo"));
  a.max_clock = reinterpret_cast<decltype(a.max_clock)>(sym("nvmlDeviceGetMaxClockInfo"));
  a.default_app_clock =
      reinterpret_cast<decltype(a.default_app_clock)>(sym("nvmlDeviceGetDefaultApplicationsClock"));
  a.ok = a.init != nullptr && a.init() == 0;
  return a;
}

const NvmlApi& api() {
  static const NvmlApi a = load();
  return a;
}

NvmlDevice device(const std::string& pci_bus_id) {
  static std::mutex mu;
  static std::map<std::string, NvmlDevice> handles;
  const NvmlApi& a = api();
  if (!a.ok || a.by_pci == nullptr) return nullptr;
  std::lock_guard lock(mu);
  auto it = handles.find(pci_bus_id);
  if (it != handles.end()) return it->second;
  NvmlDevice d = nullptr;
  if (a.by_pci(pci_bus_id.c_str(), &d) != 0) d = nullptr;
  handles.emplace(pci_bus_id, d);
  return d;
}

int read_clock(NvmlReturn (*fn)(NvmlDevice, int, unsigned*), NvmlDevice d) {
  unsigned mhz = 0;
  if (fn == nullptr || d == nullptr || fn(d, kNvmlClockSm, &mhz) != 0) return 0;
  return static_cast<int>(mhz);
}

}  // namespace

bool nvml_available() { return api().ok; }

std::string nvml_driver_version() {
  const NvmlApi& a = api();
  char buf[96] = {};
  if (!a.ok || a.driver_version == nullptr || a.driver_version(buf, sizeof(buf) - 1) != 0) {
    return "unknown";
  }
  return buf;
}

Clocks nvml_clocks(const std::string& pci_bus_id) {
  const NvmlApi& a = api();
  NvmlDevice d = device(pci_bus_id);
  Clocks c;
  c.sm_mhz = read_clock(a.clock, d);
  c.sm_default_mhz = read_clock(a.default_app_clock, d);
  c.sm_max_mhz = read_clock(a.max_clock, d);
  return c;
}

int nvml_sm_clock_mhz(const std::string& pci_bus_id) {
  return read_clock(api().clock, device(pci_bus_id));
}

}  // namespace moetune::cuda
