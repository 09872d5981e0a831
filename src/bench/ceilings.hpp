// The measured hardware ceilings of one GPU: device-to-device copy bandwidth (bytes read plus
// bytes written) and the mma.sync peak per dtype (kernels/mma_peak.cuh over all SMs). Measured
// once per machine: the result is cached as a small JSON in the JIT cache directory, keyed by
// device name and driver version.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "moetune/dtype.hpp"
#include "moetune/roofline.hpp"

namespace moetune::bench {

inline constexpr int kCeilingsSchemaVersion = 1;

struct MeasuredCeilings {
  std::string device_name;     // e.g. "NVIDIA H200"
  std::string driver_version;  // NVML's "580.159.04", else CUDA's "13.0"
  int sm_count = 0;
  double copy_bandwidth_Bps = 0;  // (read + write bytes) / time, median of the copies
  double copy_bytes = 0;          // bytes of one copy (each direction)
  double bf16_flops = 0;          // mma.sync dense peak, FLOP/s
  double fp16_flops = 0;
  double fp8_flops = 0;     // 0 when the GPU has no fp8 mma (below sm_89)
  double sm_clock_mhz = 0;  // median SM clock during the MMA runs (0 = unknown)
  std::string kernel_source_hash;
  std::string measured_at;  // UTC, ISO 8601
  bool from_cache = false;

  // The roofline's ceilings for a dtype; InputError when fp8 is not supported here.
  Ceilings for_dtype(Dtype d) const;
  nlohmann::json to_json() const;
  // InputError naming the field when one is missing or malformed.
  static MeasuredCeilings from_json(const nlohmann::json& j);
};

struct CeilingsOptions {
  bool use_cache = true;                   // read and write the JSON cache
  std::string cache_dir;                   // "" = the JIT cache directory
  double copy_bytes = 2.0 * (1ull << 30);  // shrunk to a third of free memory when needed
  int copies = 10;                         // timed copies (median)
  int mma_launches = 5;                    // timed launches per kernel variant (median)
  double mma_launch_s = 0.02;              // target duration of one MMA launch
};

// "<cache_dir>/ceilings-<device name, spaces as _>-<driver>.json"
std::string ceilings_cache_path(const std::string& cache_dir, const std::string& device_name,
                                const std::string& driver_version);

// The ceilings cached at `path` for this device and driver, or nullopt (a miss) when the file
// is absent, not a regular file (a FIFO must not block the run, nor /dev/zero fill memory),
// unreadable, malformed, or another machine's. Never throws for the file's sake.
std::optional<MeasuredCeilings> read_ceilings_cache(const std::string& path,
                                                    const std::string& device_name,
                                                    const std::string& driver_version);
// Writes `m` to `path` atomically, creating its folder. False, with nothing written, when that
// fails or when `path` is something other than a regular file (a FIFO or a device is left as it
// is): a cache that cannot be written costs a re-measure only.
bool write_ceilings_cache(const std::string& path, const MeasuredCeilings& m);

// Reads the cache when valid, else measures on device `ordinal` and writes it (atomically).
MeasuredCeilings measure_ceilings(int ordinal = 0, const CeilingsOptions& opts = {});

}  // namespace moetune::bench
