// Measured ceilings: JSON round trip and cache naming on the CPU; on a GPU machine (same binary)
// the copy bandwidth and MMA peak against the datasheet, the cache hit, and a graph measurement.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "bench/ceilings.hpp"
#include "bench/measure.hpp"
#include "cuda/context.hpp"
#include "cuda/device.hpp"
#include "cuda/driver.hpp"
#include "fifo_test_util.hpp"
#include "moetune/error.hpp"

namespace fs = std::filesystem;
using moetune::bench::MeasuredCeilings;

namespace {
MeasuredCeilings example() {
  MeasuredCeilings m;
  m.device_name = "NVIDIA H200";
  m.driver_version = "580.159.04";
  m.sm_count = 132;
  m.copy_bandwidth_Bps = 4.3e12;
  m.copy_bytes = 2147483648.0;
  m.bf16_flops = 650e12;
  m.fp16_flops = 655e12;
  m.fp8_flops = 1300e12;
  m.sm_clock_mhz = 1980;
  m.kernel_source_hash = std::string(64, 'a');
  m.measured_at = "2026-11-30T04:00:00Z";
  return m;
}
}  // namespace

TEST(BenchCeilings, JsonRoundTrip) {
  MeasuredCeilings m = example();
  MeasuredCeilings back = MeasuredCeilings::from_json(m.to_json());
  EXPECT_EQ(back.device_name, "NVIDIA H200");
  EXPECT_EQ(back.driver_version, "580.159.04");
  EXPECT_EQ(back.sm_count, 132);
  EXPECT_DOUBLE_EQ(back.copy_bandwidth_Bps, 4.3e12);
  EXPECT_DOUBLE_EQ(back.fp8_flops, 1300e12);
  EXPECT_EQ(back.measured_at, m.measured_at);
  EXPECT_FALSE(back.from_cache);
  EXPECT_EQ(m.to_json()["schema_version"], moetune::bench::kCeilingsSchemaVersion);
}

TEST(BenchCeilings, FromJsonNamesTheBadField) {
  auto j = example().to_json();
  j.erase("bf16_flops");
  try {
    MeasuredCeilings::from_json(j);
    ADD_FAILURE() << "no throw";
  } catch (const moetune::InputError& e) {
    EXPECT_EQ(e.field(), "bf16_flops");
  }
  j = example().to_json();
  j["schema_version"] = 99;
  EXPECT_THROW(MeasuredCeilings::from_json(j), moetune::InputError);
  j = example().to_json();
  j["copy_bandwidth_Bps"] = 0;
  EXPECT_THROW(MeasuredCeilings::from_json(j), moetune::InputError);
}

TEST(BenchCeilings, ForDtype) {
  MeasuredCeilings m = example();
  EXPECT_DOUBLE_EQ(m.for_dtype(moetune::Dtype::bf16).peak_flops, 650e12);
  EXPECT_DOUBLE_EQ(m.for_dtype(moetune::Dtype::fp16).peak_flops, 655e12);
  EXPECT_DOUBLE_EQ(m.for_dtype(moetune::Dtype::fp8_w8a8).peak_flops, 1300e12);
  EXPECT_DOUBLE_EQ(m.for_dtype(moetune::Dtype::fp8_w8a8).bandwidth_Bps, 4.3e12);
  m.fp8_flops = 0;  // e.g. an A100
  EXPECT_THROW(m.for_dtype(moetune::Dtype::fp8_w8a8), moetune::InputError);
}

TEST(BenchCeilings, CachePath) {
  EXPECT_EQ(moetune::bench::ceilings_cache_path("/c", "NVIDIA H200", "580.159.04"),
            "/c/ceilings-NVIDIA_H200-580.159.04.json");
  EXPECT_EQ(
      moetune::bench::ceilings_cache_path("/c", "NVIDIA RTX PRO 6000 Blackwell/x", "cuda-13.0"),
      "/c/ceilings-NVIDIA_RTX_PRO_6000_Blackwell_x-cuda-13.0.json");
}

// The cache read and write that measure_ceilings does, on the CPU: a hit for this device and
// driver only; a miss for anything else, written atomically.
TEST(BenchCeilings, CacheRoundTrip) {
  using moetune::bench::read_ceilings_cache;
  const fs::path dir =
      fs::temp_directory_path() / ("moetune-ceil-rt-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const std::string path = (dir / "sub" / "ceilings.json").string();
  EXPECT_FALSE(read_ceilings_cache(path, "NVIDIA H200", "580.159.04"));  // absent
  ASSERT_TRUE(moetune::bench::write_ceilings_cache(path, example()));    // makes the folder
  const auto hit = read_ceilings_cache(path, "NVIDIA H200", "580.159.04");
  ASSERT_TRUE(hit);
  EXPECT_TRUE(hit->from_cache);
  EXPECT_DOUBLE_EQ(hit->bf16_flops, 650e12);
  EXPECT_FALSE(read_ceilings_cache(path, "NVIDIA H200", "575.0"));  // another driver
  std::ofstream(path) << "{";
  EXPECT_FALSE(read_ceilings_cache(path, "NVIDIA H200", "580.159.04"));  // malformed
  fs::remove_all(dir);
}

// A cache file that is not a regular file is a miss, at once, and is left as it is: a FIFO
// there blocked `--measured-ceilings` forever, a link to /dev/zero read without end, and the
// measured result was renamed over either.
TEST(BenchCeilings, CacheThatIsNotARegularFileIsAMissLeftAsItIs) {
  using moetune::bench::read_ceilings_cache;
  using moetune::bench::write_ceilings_cache;
  const fs::path dir =
      fs::temp_directory_path() / ("moetune-ceil-nr-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path fifo = dir / "ceilings.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_FALSE(moetune::testing::unless_blocked_on(
      fifo, [&] { return read_ceilings_cache(fifo.string(), "NVIDIA H200", "580.159.04"); }));
  EXPECT_FALSE(write_ceilings_cache(fifo.string(), example()));
  EXPECT_TRUE(fs::is_fifo(fifo));

  const fs::path folder = dir / "folder.json";
  fs::create_directory(folder);
  EXPECT_FALSE(read_ceilings_cache(folder.string(), "NVIDIA H200", "580.159.04"));
  EXPECT_FALSE(write_ceilings_cache(folder.string(), example()));
  EXPECT_TRUE(fs::is_directory(folder));

  if (fs::exists("/dev/zero")) {
    const fs::path zero = dir / "zero.json";
    fs::create_symlink("/dev/zero", zero);
    EXPECT_FALSE(read_ceilings_cache(zero.string(), "NVIDIA H200", "580.159.04"));
    EXPECT_FALSE(write_ceilings_cache(zero.string(), example()));
    EXPECT_TRUE(fs::is_symlink(zero));
  }
  fs::remove_all(dir);
}

TEST(BenchCeilings, NoGpuIsGpuUnavailable) {
  if (moetune::cuda::gpu_available()) GTEST_SKIP() << "a GPU is present";
  EXPECT_THROW(moetune::bench::measure_ceilings(0), moetune::GpuUnavailable);
  EXPECT_THROW(moetune::bench::measure([](CUstream, int) {}), moetune::GpuUnavailable);
}

class BenchGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!moetune::cuda::gpu_available()) GTEST_SKIP() << "no GPU here";
  }
};

TEST_F(BenchGpu, MeasureColdCopiesIsStableAndPlausible) {
  namespace cu = moetune::cuda;
  cu::Context& ctx = cu::Context::get(0);
  cu::DeviceInfo info = cu::query_device(0);
  // 16 source buffers of 16 MiB (4x an H200's L2 together) copied into one destination.
  const std::size_t bytes = 16u << 20;
  std::vector<cu::DeviceBuffer> src;
  for (int i = 0; i < 16; ++i) {
    src.emplace_back(ctx, bytes);
    src.back().fill_u32(0x01020304u + i);
  }
  cu::DeviceBuffer dst(ctx, bytes);
  moetune::bench::MeasureOptions o;
  auto enqueue = [&](CUstream s, int i) { dst.copy_from_async(src[i], bytes, s); };
  moetune::bench::Samples cold = moetune::bench::measure(enqueue, o);
  EXPECT_EQ(cold.stop_reason, "stable");
  EXPECT_EQ(cold.calls_per_replay % 16, 0);
  EXPECT_GE(cold.calls_per_replay * cold.summary().median_s, 190e-6);
  double bw = 2.0 * bytes / cold.summary().median_s;
  RecordProperty("cold_copy_GBps", std::to_string(bw / 1e9));
  if (info.name == "NVIDIA H200") {
    EXPECT_GT(bw, 2.5e12);
    EXPECT_LT(bw, 4.9e12);  // datasheet 4.8 TB/s: no L2-resident cheat
  }
  o.hot = true;
  moetune::bench::Samples hot = moetune::bench::measure(enqueue, o);
  EXPECT_EQ(hot.rotation, 1);
  EXPECT_GT(hot.per_call_s.size(), 9u);
  std::printf(
      "cold copy %.1f us (%.0f GB/s, R=%d, n=%zu, clock %.0f MHz, default %.0f), "
      "hot %.1f us\n",
      cold.summary().median_s * 1e6, bw / 1e9, cold.calls_per_replay, cold.per_call_s.size(),
      cold.clock.median_mhz, cold.clock.default_mhz, hot.summary().median_s * 1e6);
}

TEST_F(BenchGpu, CeilingsNearTheDatasheetAndCached) {
  fs::path dir = fs::temp_directory_path() / ("moetune-ceil-" + std::to_string(::getpid()));
  moetune::bench::CeilingsOptions o;
  o.cache_dir = dir.string();
  MeasuredCeilings m = moetune::bench::measure_ceilings(0, o);
  EXPECT_FALSE(m.from_cache);
  std::printf(
      "copy %.0f GB/s over %.2f GiB; mma.sync bf16 %.1f, fp16 %.1f, fp8 %.1f TFLOP/s at "
      "%.0f MHz\n",
      m.copy_bandwidth_Bps / 1e9, m.copy_bytes / (1u << 30), m.bf16_flops / 1e12,
      m.fp16_flops / 1e12, m.fp8_flops / 1e12, m.sm_clock_mhz);
  EXPECT_GT(m.copy_bandwidth_Bps, 1e11);
  EXPECT_GT(m.bf16_flops, 1e13);
  if (m.device_name == "NVIDIA H200") {
    EXPECT_GT(m.copy_bandwidth_Bps, 3.5e12);
    EXPECT_LT(m.copy_bandwidth_Bps, 4.8e12);
    EXPECT_GT(m.bf16_flops, 300e12);
    EXPECT_LT(m.bf16_flops, 989.5e12);
    EXPECT_GT(m.fp8_flops, m.bf16_flops);
    EXPECT_LT(m.fp8_flops, 1979e12);
  }
  MeasuredCeilings again = moetune::bench::measure_ceilings(0, o);
  EXPECT_TRUE(again.from_cache);
  EXPECT_DOUBLE_EQ(again.bf16_flops, m.bf16_flops);
  fs::remove_all(dir);
}

TEST_F(BenchGpu, MeasuresOnTheLastGpu) {
  namespace cu = moetune::cuda;
  int last = cu::device_count() - 1;
  if (last == 0) GTEST_SKIP() << "one GPU";
  cu::Context& ctx = cu::Context::get(last);
  cu::DeviceBuffer a(ctx, 64u << 20), b(ctx, 64u << 20);
  a.fill_u32(1);
  moetune::bench::MeasureOptions o;
  o.hot = true;
  o.device = last;
  auto s = moetune::bench::measure(
      [&](CUstream st, int) { b.copy_from_async(a, a.bytes(), st); }, o);
  EXPECT_GE(s.per_call_s.size(), 10u);
  double bw = 2.0 * a.bytes() / s.summary().median_s;
  std::printf("GPU %d: hot 64 MiB copy %.0f GB/s, clock %.0f MHz\n", last, bw / 1e9,
              s.clock.median_mhz);
  EXPECT_GT(bw, 1e11);
}
