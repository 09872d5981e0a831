// Driver, contexts and device objects. Without a GPU: the one-line GpuUnavailable answer.
// With a GPU (the same binary on a GPU machine): device query, buffers, streams, events, a
// graph, and Jit::get loading and running the mma_peak kernel.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <numeric>
#include <thread>

#include "cuda/context.hpp"
#include "cuda/device.hpp"
#include "cuda/driver.hpp"
#include "cuda/jit.hpp"
#include "cuda/nvml.hpp"
#include "moetune/error.hpp"

namespace cu = moetune::cuda;

TEST(CudaDriver, AnswersWithOrWithoutGpu) {
  std::string why;
  bool ok = cu::gpu_available(&why);
  if (ok) {
    EXPECT_NO_THROW(cu::require_gpu());
    EXPECT_GE(cu::device_count(), 1);
  } else {
    EXPECT_FALSE(why.empty());
    EXPECT_EQ(why.find('\n'), std::string::npos) << why;
    try {
      cu::require_gpu();
      ADD_FAILURE() << "require_gpu did not throw";
    } catch (const moetune::GpuUnavailable& e) {
      EXPECT_EQ(std::string(e.what()), why);
    }
    EXPECT_THROW(cu::DeviceBuffer(1024), moetune::GpuUnavailable);
    EXPECT_THROW(cu::Context::get(0), moetune::GpuUnavailable);
  }
  // NVML never fails: "unknown" values without it.
  EXPECT_FALSE(cu::nvml_driver_version().empty());
  EXPECT_GE(cu::nvml_clocks("0000:00:00.0").sm_mhz, 0);
}

class CudaGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cu::gpu_available()) GTEST_SKIP() << "no GPU here";
  }
};

TEST_F(CudaGpu, DeviceQuery) {
  cu::DeviceInfo info = cu::query_device(0);
  EXPECT_FALSE(info.name.empty());
  EXPECT_GE(info.cc_major, 7);
  EXPECT_GT(info.sm_count, 0);
  EXPECT_GE(info.smem_per_block_optin_bytes, 48 * 1024);
  EXPECT_GT(info.l2_bytes, 0);
  EXPECT_GT(info.memory_bytes, std::size_t(1) << 30);
  EXPECT_GE(info.driver_version, 11000);
  EXPECT_EQ(info.arch().rfind("sm_", 0), 0u);
  EXPECT_EQ(info.pci_bus_id.size(), 12u) << info.pci_bus_id;
  EXPECT_THROW(cu::query_device(1000), moetune::InputError);
  if (info.name == "NVIDIA H200") {
    EXPECT_EQ(info.sm_count, 132);
    EXPECT_EQ(info.smem_per_block_optin_bytes, 232448);
    EXPECT_EQ(info.arch(), "sm_90a");
  }
  if (cu::nvml_available()) {
    cu::Clocks c = cu::nvml_clocks(info.pci_bus_id);
    EXPECT_GT(c.sm_mhz, 0);
    EXPECT_GE(c.sm_max_mhz, c.sm_mhz);
  }
}

TEST_F(CudaGpu, BuffersRoundTripAndPoison) {
  cu::Context& ctx = cu::Context::get(0);
  std::vector<std::uint32_t> host(1 << 20);
  std::iota(host.begin(), host.end(), 7u);
  cu::DeviceBuffer a(ctx, host.size() * 4), b(ctx, host.size() * 4);
  a.upload(host);
  b.fill_u32(0xdeadbeefu);
  EXPECT_EQ(b.download_as<std::uint32_t>(3),
            (std::vector<std::uint32_t>{0xdeadbeefu, 0xdeadbeefu, 0xdeadbeefu}));
  cu::Stream stream(ctx);
  b.copy_from_async(a, a.bytes(), stream);
  stream.synchronize();
  EXPECT_EQ(b.download_as<std::uint32_t>(host.size()), host);
  b.fill_u8(0xff);
  EXPECT_EQ(b.download_as<std::uint32_t>(1)[0], 0xffffffffu);
  EXPECT_THROW(b.download(host.data(), 8, b.bytes() - 4), moetune::InputError);
  cu::DeviceBuffer moved = std::move(a);
  EXPECT_EQ(a.ptr(), 0u);
  EXPECT_EQ(moved.download_as<std::uint32_t>(2), (std::vector<std::uint32_t>{7u, 8u}));
}

// fill_u8 and upload are complete when they return, also for work on a non-blocking stream
// (cuda::Stream): without the wait, the legacy-stream memset of 1 GiB was still running when the
// stream's 4-byte memset at its end ran, and then overwrote it. `moetune check` and the tuner's
// accuracy check poison outputs with fill_u8 right before launching on such a stream.
TEST_F(CudaGpu, SynchronousFillsAndUploadsAreDoneBeforeStreamWork) {
  cu::Context& ctx = cu::Context::get(0);
  const std::size_t big = std::size_t(1) << 30;
  cu::DeviceBuffer b(ctx, big);
  cu::Stream stream(ctx);
  std::vector<std::uint8_t> host(4 << 20, 9);
  for (int round = 0; round < 4; ++round) {
    b.fill_u8(1);
    MOETUNE_CU(cuMemsetD8Async, b.ptr() + big - 4, 2, 4, stream.handle());
    stream.synchronize();
    std::uint8_t last[8];
    b.download(last, 8, big - 8);
    EXPECT_EQ(last[3], 1) << "fill_u8, round " << round;
    EXPECT_EQ(last[7], 2) << "fill_u8, round " << round;
    b.upload(host.data(), host.size(), big - host.size());
    MOETUNE_CU(cuMemsetD8Async, b.ptr() + big - 4, 3, 4, stream.handle());
    stream.synchronize();
    b.download(last, 8, big - 8);
    EXPECT_EQ(last[3], 9) << "upload, round " << round;
    EXPECT_EQ(last[7], 3) << "upload, round " << round;
  }
}

TEST_F(CudaGpu, JitGetLaunchesMmaPeakInAGraph) {
  auto dir = std::filesystem::temp_directory_path() / ("moetune-gpu-" + std::to_string(::getpid()));
  cu::Jit jit(dir.string());
  cu::Context& ctx = cu::Context::get(0);
  cu::KernelSpec spec;
  spec.file = "mma_peak.cuh";
  spec.kernel = "moetune::mma_peak";
  spec.template_args = {{"T", "__nv_bfloat16"}, {"kChains", "4"}};
  spec.name = "mma_peak_bf16_c4";  // arch empty: the device's
  auto kernel = jit.get(spec);
  EXPECT_EQ(jit.get(spec).get(), kernel.get());  // memoized per context
  EXPECT_GT(kernel->num_regs(), 0);
  EXPECT_EQ(kernel->local_bytes(), 0);
  EXPECT_GT(kernel->max_active_blocks_per_sm(128, 0), 0);

  const int blocks = 4, threads = 128;
  cu::DeviceBuffer out(ctx, blocks * threads * sizeof(float));
  out.fill_u32(0x7fc00000u);  // NaN poison
  cu::Stream stream(ctx);
  int iterations = 1000;
  CUdeviceptr out_ptr = out.ptr();
  void* args[] = {&out_ptr, &iterations};
  cu::Graph graph;
  graph.begin_capture(stream);
  kernel->launch({blocks}, {threads}, 0, stream, args);
  graph.end_capture();
  cu::Event start(ctx), end(ctx);
  start.record(stream);
  graph.launch(stream);
  end.record(stream);
  end.synchronize();
  EXPECT_GT(cu::Event::elapsed_ms(start, end), 0.0f);
  auto values = out.download_as<float>(blocks * threads);
  for (float v : values) ASSERT_TRUE(std::isfinite(v));
  std::filesystem::remove_all(dir);
}

TEST_F(CudaGpu, OneWorkerPerGpu) {
  int n = cu::device_count();
  if (n < 2) GTEST_SKIP() << "one GPU";
  cu::Jit& jit = cu::Jit::instance();
  cu::KernelSpec spec;
  spec.file = "mma_peak.cuh";
  spec.kernel = "moetune::mma_peak";
  spec.template_args = {{"T", "__nv_bfloat16"}, {"kChains", "2"}};
  spec.name = "mma_peak_bf16_c2";
  std::vector<std::shared_ptr<cu::LoadedKernel>> kernels(n);
  std::vector<float> first(n, 0);
  std::vector<std::thread> workers;
  for (int d = 0; d < n; ++d) {
    workers.emplace_back([&, d] {
      cu::Context& ctx = cu::Context::get(d);  // current on this worker's thread
      kernels[d] = jit.get(spec);              // loaded into this GPU's context
      cu::DeviceBuffer out(ctx, 128 * sizeof(float));
      out.fill_u32(0x7fc00000u);
      cu::Stream stream(ctx);
      CUdeviceptr p = out.ptr();
      int iterations = 10;
      void* args[] = {&p, &iterations};
      kernels[d]->launch({1}, {128}, 0, stream, args);
      stream.synchronize();
      first[d] = out.download_as<float>(1)[0];
    });
  }
  for (auto& w : workers) w.join();
  for (int d = 0; d < n; ++d) {
    EXPECT_TRUE(std::isfinite(first[d])) << d;
    EXPECT_EQ(first[d], first[0]) << d;  // same kernel, same result on every GPU
    for (int e = 0; e < d; ++e) EXPECT_NE(kernels[d].get(), kernels[e].get());
  }
  // A buffer made for GPU 1 while GPU 0 is current lives on GPU 1 and is freed there.
  cu::Context::get(0);
  {
    cu::DeviceBuffer b(cu::Context::get(1), 4096);
    cu::Context::get(0);
    b.fill_u8(3);
    EXPECT_EQ(b.download_as<std::uint8_t>(2), (std::vector<std::uint8_t>{3, 3}));
  }
  CUcontext cur = nullptr;
  cu::driver().cuCtxGetCurrent(&cur);
  EXPECT_EQ(cur, cu::Context::get(0).handle());
}
