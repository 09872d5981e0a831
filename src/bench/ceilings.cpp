// Copy bandwidth and mma.sync peak, and their per-machine JSON cache.
#include "bench/ceilings.hpp"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <sstream>

#include "cuda/context.hpp"
#include "cuda/device.hpp"
#include "cuda/driver.hpp"
#include "cuda/jit.hpp"
#include "cuda/jit_cache.hpp"
#include "cuda/kernel_sources.hpp"
#include "cuda/nvml.hpp"
#include "io/regular_file.hpp"
#include "model/json_text.hpp"
#include "moetune/error.hpp"
#include "moetune/stats.hpp"

namespace moetune::bench {
namespace {

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string file_safe(std::string s) {
  for (char& c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-' || c == '_';
    if (!ok) c = '_';
  }
  return s;
}

double time_copies(cuda::Context& ctx, double want_bytes, int copies) {
  std::size_t free_b = 0, total_b = 0;
  MOETUNE_CU(cuMemGetInfo, &free_b, &total_b);
  auto bytes = static_cast<std::size_t>(std::min(want_bytes, static_cast<double>(free_b) / 3));
  bytes = bytes / 4096 * 4096;
  cuda::DeviceBuffer src(ctx, bytes), dst(ctx, bytes);
  src.fill_u32(0x3f8ccccdu);  // not zeros
  dst.fill_u32(0);
  cuda::Stream stream(ctx);
  cuda::Event start(ctx), end(ctx);
  for (int i = 0; i < 2; ++i) dst.copy_from_async(src, bytes, stream);  // warm-up
  std::vector<double> bw;
  for (int i = 0; i < copies; ++i) {
    start.record(stream);
    dst.copy_from_async(src, bytes, stream);
    end.record(stream);
    end.synchronize();
    double s = cuda::Event::elapsed_ms(start, end) * 1e-3;
    bw.push_back(2.0 * static_cast<double>(bytes) / s);
  }
  return median(bw);
}

struct MmaResult {
  double flops = 0;
  double clock_mhz = 0;
};

// Best over a few chain counts of the median rate of `launches` launches of ~launch_s each.
MmaResult time_mma(cuda::Context& ctx, const cuda::DeviceInfo& info, const std::string& type,
                   int flops_per_mma, const CeilingsOptions& opts) {
  MmaResult best;
  for (int chains : {4, 8}) {
    cuda::KernelSpec spec;
    spec.file = "mma_peak.cuh";
    spec.kernel = "moetune::mma_peak";
    spec.template_args = {{"T", type}, {"kChains", std::to_string(chains)}};
    spec.arch = info.arch();
    spec.name = "mma_peak_" + type + "_c" + std::to_string(chains);
    auto kernel = cuda::Jit::instance().get(spec);
    const int threads = 256;
    int per_sm = std::max(1, kernel->max_active_blocks_per_sm(threads, 0));
    int blocks = info.sm_count * per_sm;
    cuda::DeviceBuffer out(ctx, static_cast<std::size_t>(blocks) * threads * sizeof(float));
    cuda::Stream stream(ctx);
    cuda::Event start(ctx), end(ctx);
    CUdeviceptr out_ptr = out.ptr();
    auto run = [&](int iterations) {
      void* args[] = {&out_ptr, &iterations};
      start.record(stream);
      kernel->launch({static_cast<unsigned>(blocks)}, {threads}, 0, stream, args);
      end.record(stream);
      end.synchronize();
      return cuda::Event::elapsed_ms(start, end) * 1e-3;
    };
    run(256);  // warm-up
    int iterations = 4096;
    double probe_s = run(iterations);
    iterations = static_cast<int>(std::clamp(iterations * opts.mma_launch_s / probe_s, 256.0, 1e8));
    std::vector<double> rates, clocks;
    for (int i = 0; i < opts.mma_launches; ++i) {
      double s = run(iterations);
      double flops = static_cast<double>(blocks) * (threads / 32) * iterations * chains *
                     static_cast<double>(flops_per_mma);
      rates.push_back(flops / s);
      if (int mhz = cuda::nvml_sm_clock_mhz(info.pci_bus_id); mhz > 0) clocks.push_back(mhz);
    }
    double rate = median(rates);
    if (rate > best.flops) {
      best.flops = rate;
      best.clock_mhz = clocks.empty() ? 0 : median(clocks);
    }
  }
  return best;
}

MeasuredCeilings measure_now(int ordinal, const CeilingsOptions& opts, const std::string& driver) {
  cuda::Context& ctx = cuda::Context::get(ordinal);
  cuda::DeviceInfo info = cuda::query_device(ordinal);
  MeasuredCeilings m;
  m.device_name = info.name;
  m.driver_version = driver;
  m.sm_count = info.sm_count;
  m.kernel_source_hash = std::string(cuda::kernel_source_hash());
  m.measured_at = utc_now();
  std::size_t free_b = 0, total_b = 0;
  MOETUNE_CU(cuMemGetInfo, &free_b, &total_b);
  m.copy_bytes =
      std::floor(std::min(opts.copy_bytes, static_cast<double>(free_b) / 3) / 4096) * 4096;
  m.copy_bandwidth_Bps = time_copies(ctx, m.copy_bytes, opts.copies);
  MmaResult bf16 = time_mma(ctx, info, "__nv_bfloat16", 2 * 16 * 8 * 16, opts);
  m.bf16_flops = bf16.flops;
  m.sm_clock_mhz = bf16.clock_mhz;
  m.fp16_flops = time_mma(ctx, info, "__half", 2 * 16 * 8 * 16, opts).flops;
  if (info.cc_major * 10 + info.cc_minor >= min_compute_capability(Dtype::fp8_w8a8)) {
    m.fp8_flops = time_mma(ctx, info, "__nv_fp8_e4m3", 2 * 16 * 8 * 32, opts).flops;
  }
  return m;
}

}  // namespace

Ceilings MeasuredCeilings::for_dtype(Dtype d) const {
  Ceilings c;
  c.bandwidth_Bps = copy_bandwidth_Bps;
  switch (d) {
    case Dtype::bf16:
      c.peak_flops = bf16_flops;
      break;
    case Dtype::fp16:
      c.peak_flops = fp16_flops;
      break;
    case Dtype::fp8_w8a8:
      if (!(fp8_flops > 0)) {
        throw InputError("dtype", "fp8_w8a8", device_name + " has no fp8 tensor cores (sm_89+)");
      }
      c.peak_flops = fp8_flops;
      break;
  }
  return c;
}

nlohmann::json MeasuredCeilings::to_json() const {
  return {{"schema_version", kCeilingsSchemaVersion},
          {"device_name", device_name},
          {"driver_version", driver_version},
          {"sm_count", sm_count},
          {"copy_bandwidth_Bps", copy_bandwidth_Bps},
          {"copy_bytes", copy_bytes},
          {"bf16_flops", bf16_flops},
          {"fp16_flops", fp16_flops},
          {"fp8_flops", fp8_flops},
          {"sm_clock_mhz", sm_clock_mhz},
          {"kernel_source_hash", kernel_source_hash},
          {"measured_at", measured_at}};
}

MeasuredCeilings MeasuredCeilings::from_json(const nlohmann::json& j) {
  auto num = [&](const char* key) {
    if (!j.contains(key) || !j[key].is_number()) throw InputError(key, "missing", "not a number");
    return j[key].get<double>();
  };
  auto str = [&](const char* key) {
    if (!j.contains(key) || !j[key].is_string()) throw InputError(key, "missing", "not a string");
    return j[key].get<std::string>();
  };
  if (num("schema_version") != kCeilingsSchemaVersion) {
    throw InputError("schema_version", j["schema_version"].dump(), "unknown ceilings schema");
  }
  MeasuredCeilings m;
  m.device_name = str("device_name");
  m.driver_version = str("driver_version");
  m.sm_count = static_cast<int>(num("sm_count"));
  m.copy_bandwidth_Bps = num("copy_bandwidth_Bps");
  m.copy_bytes = num("copy_bytes");
  m.bf16_flops = num("bf16_flops");
  m.fp16_flops = num("fp16_flops");
  m.fp8_flops = num("fp8_flops");
  m.sm_clock_mhz = num("sm_clock_mhz");
  m.kernel_source_hash = str("kernel_source_hash");
  m.measured_at = str("measured_at");
  if (!(m.copy_bandwidth_Bps > 0) || !(m.bf16_flops > 0)) {
    throw InputError("copy_bandwidth_Bps", std::to_string(m.copy_bandwidth_Bps),
                     "ceilings must be positive");
  }
  return m;
}

std::string ceilings_cache_path(const std::string& cache_dir, const std::string& device_name,
                                const std::string& driver_version) {
  return cache_dir + "/ceilings-" + file_safe(device_name) + "-" + file_safe(driver_version) +
         ".json";
}

std::optional<MeasuredCeilings> read_ceilings_cache(const std::string& path,
                                                    const std::string& device_name,
                                                    const std::string& driver_version) {
  const io::FileBytes text = io::read_regular_file(path, model::kMaxJsonFileBytes, "a cache file");
  if (!text.bytes) return std::nullopt;
  try {
    MeasuredCeilings m = MeasuredCeilings::from_json(nlohmann::json::parse(*text.bytes));
    if (m.device_name != device_name || m.driver_version != driver_version) return std::nullopt;
    m.from_cache = true;
    return m;
  } catch (const std::exception&) {
    return std::nullopt;  // malformed or foreign: measure again and overwrite
  }
}

bool write_ceilings_cache(const std::string& path, const MeasuredCeilings& m) {
  if (!io::not_replaceable_reason(path).empty()) return false;  // not ours to replace
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  return cuda::write_file_atomic(path, m.to_json().dump(2) + "\n");
}

MeasuredCeilings measure_ceilings(int ordinal, const CeilingsOptions& opts) {
  cuda::require_gpu();
  cuda::DeviceInfo info = cuda::query_device(ordinal);
  std::string driver = cuda::nvml_driver_version();
  if (driver == "unknown") driver = "cuda-" + info.driver_version_string();
  std::string dir = opts.cache_dir.empty() ? cuda::Jit::instance().cache_dir() : opts.cache_dir;
  std::string path = ceilings_cache_path(dir, info.name, driver);
  if (opts.use_cache) {
    if (std::optional<MeasuredCeilings> cached = read_ceilings_cache(path, info.name, driver)) {
      return *cached;
    }
  }
  MeasuredCeilings m = measure_now(ordinal, opts, driver);
  if (opts.use_cache) write_ceilings_cache(path, m);  // failure costs a re-measure
  return m;
}

}  // namespace moetune::bench
