// NVML, loaded with dlopen("libnvidia-ml.so.1") when present: SM clocks and the driver version.
// Absent NVML (or a device it cannot see) gives "unknown" values (0 / ""), never an error.
#pragma once
#include <string>

namespace moetune::cuda {

struct Clocks {
  int sm_mhz = 0;          // SM clock now (0 = unknown)
  int sm_default_mhz = 0;  // default application SM clock (0 = unknown)
  int sm_max_mhz = 0;      // max SM clock (0 = unknown)
  bool known() const { return sm_mhz > 0; }
};

bool nvml_available();
// "580.159.03", or "unknown".
std::string nvml_driver_version();
// Clocks of the GPU with this PCI bus id (DeviceInfo::pci_bus_id, e.g. "0000:19:00.0").
Clocks nvml_clocks(const std::string& pci_bus_id);
// Only the current SM clock (cheap: one NVML call once the handle is known); 0 = unknown.
int nvml_sm_clock_mhz(const std::string& pci_bus_id);

}  // namespace moetune::cuda
