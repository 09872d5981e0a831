// The routing's L2 prefetch of GEMM1's first weight columns (FusedMoeOptions::
// routing_prefetch_lines; the TMA's tensor prefetch, sm_90+) on a GPU: a prefetch moves no data
// an output depends on, so the layer's output with it is the same bits as without (both with the
// separate top-k sum, which is bit-reproducible), eager and in a CUDA graph, for block fp8 (the
// routing also quantizes) and bf16, at stage-path sizes from M = 6 to one past a multiple of the
// routing block, with a prefetch longer than GEMM1's rows allow (clamped), with GEMM1 split in K
// (M = 6 on block fp8), and at EP rank 1 of 2 (only this rank's experts are fetched). A bad
// tensor map or box coordinate would fault the launch (an illegal-instruction or
// misaligned-address error), which these runs would report.
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cuda/context.hpp"
#include "cuda/device.hpp"
#include "cuda/driver.hpp"
#include "moe/bench_data.hpp"
#include "moe/check.hpp"
#include "moetune/fused_moe.hpp"
#include "test_moe_common.hpp"

namespace moetune::moe {
namespace {

using testing::local_gpu;
using testing::run_layer;

class MoeRoutePrefetchGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda::gpu_available(&why)) GTEST_SKIP() << why;
    cuda::Context::get(0);
    const std::string arch = cuda::query_device(0).arch();
    if (!arch_supports_pdl(arch)) GTEST_SKIP() << "the tensor prefetch is sm_90+'s, this GPU is " << arch;
  }
};

void expect_same(const MoeShape& s, int rank, const std::vector<std::int64_t>& batch, int lines) {
  FusedMoeOptions on, off;
  on.rank = off.rank = rank;
  on.decode_kernels = off.decode_kernels = false;
  on.topk_sum_in_gemm2 = off.topk_sum_in_gemm2 = false;  // bit-reproducible on both sides
  on.routing_prefetch_lines = lines;
  FusedMoe f(s, local_gpu(), {}, {}, on), g(s, local_gpu(), {}, {}, off);
  std::int64_t max_M = 1;
  for (auto M : batch) max_M = std::max(max_M, M);
  f.prepare(max_M);
  g.prepare(max_M);
  cuda::Stream stream;
  BenchData d;
  make_bench_weights(f, 29, d);
  for (std::int64_t M : batch) {
    make_bench_sets(f, M, 1, std::size_t(1) << 34, 2900 + M, d, stream);
    stream.synchronize();
    const std::string what = std::string(to_string(s.dtype)) + " rank " + std::to_string(rank) +
                             " M=" + std::to_string(M) + " lines=" + std::to_string(lines) +
                             " split_k=" + std::to_string(f.up_config(M).SPLIT_K);
    const auto want = run_layer(g, d, false, stream);
    d.sets.at(0).workspace.fill_u8(0x5A);  // whatever the routing must write, it writes
    const auto eager = run_layer(f, d, false, stream);
    const auto graph = run_layer(f, d, true, stream);
    EXPECT_TRUE(eager == want) << what << ": eager output differs from the layer without prefetch";
    EXPECT_TRUE(graph == want) << what << ": graph output differs from the layer without prefetch";
    std::printf("%-5s %s\n", eager == want && graph == want ? "ok" : "FAIL", what.c_str());
    std::fflush(stdout);
  }
}

TEST_F(MoeRoutePrefetchGpu, SameOutputAsWithoutIt) {
  for (int shape : {0, 1}) {  // Qwen3.5 TP4, DeepSeek-V3 TP8
    for (const char* variant : {"fp8_block", "bf16"}) {
      const MoeShape s = with_dtype_variant(anchor_check_shapes()[shape].shape, variant);
      expect_same(s, 0, {6, 8, 13, 32, 257}, 4);
    }
  }
  // More lines than a row holds: clamped to the row (or to a split of it).
  expect_same(with_dtype_variant(anchor_check_shapes()[0].shape, "fp8_block"), 0, {6, 8}, 1000);
}

TEST_F(MoeRoutePrefetchGpu, ExpertParallelRank) {
  MoeShape s = with_dtype_variant(anchor_check_shapes()[1].shape, "fp8_block");  // DeepSeek-V3
  s.E = s.E_global / 2;  // EP 2: this rank holds global experts [E, 2E)
  expect_same(s, 1, {8, 32}, 4);
}

}  // namespace
}  // namespace moetune::moe
