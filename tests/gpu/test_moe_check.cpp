// The MoE pipeline on a GPU against the fp64 reference (src/moe/check.cpp): every stage and the
// whole layer, every dtype, on the anchor shapes; EP; M = 40000; CUDA-graph capture.
// MOETUNE_CHECK_BATCH="1,8,...", MOETUNE_CHECK_DTYPES="bf16,..." and MOETUNE_CHECK_RANDOM=n
// narrow or widen the plan.
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include <gtest/gtest.h>

#include "cuda/context.hpp"
#include "cuda/device.hpp"
#include "cuda/driver.hpp"
#include "moe/check.hpp"
#include "moe/reference.hpp"
#include "moetune/fused_moe.hpp"
#include "moetune/gpu_spec.hpp"

#include "test_moe_common.hpp"

namespace moetune::moe {
namespace {

using moetune::moe::testing::local_gpu;

CheckOptions options_from_env() {
  CheckOptions o;
  if (const char* b = std::getenv("MOETUNE_CHECK_BATCH")) {
    o.batch.clear();
    std::stringstream ss(b);
    for (std::string tok; std::getline(ss, tok, ',');) o.batch.push_back(std::stoll(tok));
  }
  if (const char* r = std::getenv("MOETUNE_CHECK_RANDOM")) o.random_configs = std::atoi(r);
  if (const char* d = std::getenv("MOETUNE_CHECK_DTYPES")) {
    o.dtypes.clear();
    std::stringstream ss(d);
    for (std::string tok; std::getline(ss, tok, ',');) o.dtypes.push_back(tok);
  }
  return o;
}

void print(const CheckResult& r) {
  std::printf("%-5s %-18s %-10s M=%-6lld %-9s err=%.3e thr=%.0e rows=%lld %s %s\n",
              r.ok ? "ok" : "FAIL", r.shape.c_str(), r.dtype.c_str(),
              static_cast<long long>(r.M), r.stage.c_str(), r.error, r.threshold,
              static_cast<long long>(r.rows), r.ok ? "" : r.config.c_str(), r.detail.c_str());
  std::fflush(stdout);
}

void expect_clean(const CheckReport& rep) {
  for (const auto& r : rep.results)
    EXPECT_TRUE(r.ok) << r.shape << " " << r.dtype << " M=" << r.M << " " << r.stage << " "
                      << r.config << ": " << r.detail;
  EXPECT_GT(rep.results.size(), 0u);
}

class MoeCheckGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda::gpu_available(&why)) GTEST_SKIP() << why;
    cuda::Context::get(0);
  }
};

TEST_F(MoeCheckGpu, AnchorShapesEveryDtypeAndStage) {
  const CheckOptions o = options_from_env();
  for (const CheckShape& cs : anchor_check_shapes()) {
    const CheckReport rep = check_shape(cs, local_gpu(), o, print);
    std::printf("seed %llu, %.1f s\n", static_cast<unsigned long long>(rep.seed), rep.wall_s);
    expect_clean(rep);
  }
}

TEST_F(MoeCheckGpu, ExpertParallelRank) {
  CheckShape cs = anchor_check_shapes()[0];
  cs.name = "qwen3.5-122b tp4 ep4 r2";
  cs.shape.E = 64;  // E_global 256 over 4 ranks; this is rank 2
  cs.shape.ep = 4;
  cs.rank = 2;
  CheckOptions o;
  o.batch = {1, 8, 257};
  o.dtypes = {"bf16", "fp8_block", "fp8_tensor"};
  expect_clean(check_shape(cs, local_gpu(), o, print));
}

TEST_F(MoeCheckGpu, DeepSeekM40000Fp8Block) {
  CheckOptions o;
  o.batch = {40000};
  o.dtypes = {"fp8_block"};
  o.random_configs = 0;
  expect_clean(check_shape(anchor_check_shapes()[1], local_gpu(), o, print));
}

// forward() captured into a CUDA graph gives the same bytes as eager (with the separate top-k
// sum: the folded one's atomic adds land in any order; test_moe_topk_sum.cpp graphs that one).
TEST_F(MoeCheckGpu, ForwardIsGraphCapturable) {
  const MoeShape s = with_dtype_variant(anchor_check_shapes()[0].shape, "bf16");
  FusedMoeOptions det;
  det.topk_sum_in_gemm2 = false;
  FusedMoe fm(s, local_gpu(), {}, {}, det);
  const std::int64_t M = 64;
  fm.prepare(M);
  std::vector<std::uint16_t> hidden(M * s.K);
  std::vector<float> logits(M * s.E_global);
  for (std::size_t i = 0; i < hidden.size(); ++i)
    hidden[i] = float_to_bf16(static_cast<float>((i * 2654435761u % 2001) / 1000.0 - 1.0));
  for (std::size_t i = 0; i < logits.size(); ++i)
    logits[i] = static_cast<float>((i * 40503u % 997) / 300.0);
  std::vector<std::uint16_t> w13(std::size_t(s.E) * 2 * s.N * s.K), w2(std::size_t(s.E) * s.K * s.N);
  for (std::size_t i = 0; i < w13.size(); ++i)
    w13[i] = float_to_bf16(static_cast<float>((i * 2246822519u % 1001) / 1000.0 - 0.5) * 0.05f);
  for (std::size_t i = 0; i < w2.size(); ++i)
    w2[i] = float_to_bf16(static_cast<float>((i * 3266489917u % 1001) / 1000.0 - 0.5) * 0.1f);
  cuda::DeviceBuffer d_h(hidden.size() * 2), d_l(logits.size() * 4), d_w13(w13.size() * 2),
      d_w2(w2.size() * 2), d_out(M * s.K * 2), d_out2(M * s.K * 2);
  d_h.upload(hidden);
  d_l.upload(logits);
  d_w13.upload(w13);
  d_w2.upload(w2);
  cuda::DeviceBuffer ws(fm.workspace_bytes(M));
  cuda::Stream stream;
  FusedMoe::init_workspace(reinterpret_cast<void*>(ws.ptr()), ws.bytes(), stream);
  MoeInputs in;
  in.M = M;
  in.hidden = reinterpret_cast<const void*>(d_h.ptr());
  in.router_logits = d_l.as<const float>();
  MoeWeights w;
  w.w13 = reinterpret_cast<const void*>(d_w13.ptr());
  w.w2 = reinterpret_cast<const void*>(d_w2.ptr());
  fm.forward(in, w, reinterpret_cast<void*>(d_out.ptr()), reinterpret_cast<void*>(ws.ptr()),
             ws.bytes(), stream);
  stream.synchronize();
  d_out2.fill_u8(0xFF);
  cuda::Graph graph;
  graph.begin_capture(stream);
  fm.forward(in, w, reinterpret_cast<void*>(d_out2.ptr()), reinterpret_cast<void*>(ws.ptr()),
             ws.bytes(), stream);
  graph.end_capture();
  graph.launch(stream);
  graph.launch(stream);
  stream.synchronize();
  EXPECT_EQ(d_out.download_as<std::uint16_t>(M * s.K), d_out2.download_as<std::uint16_t>(M * s.K));
}

}  // namespace
}  // namespace moetune::moe
