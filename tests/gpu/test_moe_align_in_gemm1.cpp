// GEMM1 deriving the alignment itself (FusedMoeOptions::alignment_in_gemm1, the sm_90a kernel;
// skipped elsewhere) on a GPU, against the same layer with the alignment launch:
// - the layer's output is the same bits (both with the separate top-k sum, which is
//   bit-reproducible), eager and in a CUDA graph of back-to-back calls that alternate two
//   routings on one workspace (each GEMM1 rewrites the tables the call before it used, with
//   other values), at every M where it applies, for block
//   fp8 (the only dtype whose decode GEMM1 is the wgmma kernel's) on Qwen3.5 TP4 and
//   DeepSeek-V3 TP8, and at EP rank 1 of 2 (this rank's experts start at E: slots of other
//   ranks must be left out);
// - the tables GEMM1 wrote over a poisoned workspace (sorted_token_ids up to the total,
//   every expert_ids entry, num_tokens_post_padded) are align_reference's exactly;
// - at the sizes it must apply to (M = 8, 16, 32 on these shapes' default tables), it does
//   (FusedMoe::gemm1_aligns), so the comparisons are not of one path with itself.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cuda/context.hpp"
#include "cuda/device.hpp"
#include "cuda/driver.hpp"
#include "moe/bench_data.hpp"
#include "moe/check.hpp"
#include "moe/reference.hpp"
#include "moetune/fused_moe.hpp"
#include "test_moe_common.hpp"

namespace moetune::moe {
namespace {

using testing::local_gpu;
using testing::run_layer;

class MoeAlignInGemm1Gpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda::gpu_available(&why)) GTEST_SKIP() << why;
    cuda::Context::get(0);
    const std::string arch = cuda::query_device(0).arch();
    if (arch != "sm_90a") GTEST_SKIP() << "the deriving GEMM1 is sm_90a's, this GPU is " << arch;
  }
};

// The layer's output [M, K] (16-bit bits) of every call in a CUDA graph of `calls` calls that
// alternate the inputs of sets 0 and 1 of `d` on set 0's workspace (so a GEMM1 rewrites the
// tables the call before it used), each call into its own poisoned output; replayed twice.
std::vector<std::vector<std::uint16_t>> alternating_graph(const FusedMoe& fm, const BenchData& d,
                                                          cuda::Stream& stream, int calls) {
  const std::size_t n = static_cast<std::size_t>(d.M) * fm.shape().K;
  const BenchSet& ws = d.sets.at(0);
  std::vector<cuda::DeviceBuffer> outs;
  for (int i = 0; i < calls; ++i) {
    outs.emplace_back(n * 2);
    outs.back().fill_u8(0xFF);
  }
  cuda::Graph g;
  g.begin_capture(stream);
  for (int i = 0; i < calls; ++i)
    fm.forward(d.sets.at(i % 2).inputs, d.weights, reinterpret_cast<void*>(outs[i].ptr()),
               reinterpret_cast<void*>(ws.workspace.ptr()), ws.workspace.bytes(), stream);
  g.end_capture();
  for (int r = 0; r < 2; ++r) g.launch(stream);
  stream.synchronize();
  std::vector<std::vector<std::uint16_t>> got;
  for (const auto& o : outs) got.push_back(o.download_as<std::uint16_t>(n));
  return got;
}

void expect_same(const MoeShape& s, int rank, const std::vector<std::int64_t>& batch,
                 const std::vector<std::int64_t>& must_apply) {
  FusedMoeOptions on, off;
  on.rank = off.rank = rank;
  on.decode_kernels = off.decode_kernels = false;
  on.topk_sum_in_gemm2 = off.topk_sum_in_gemm2 = false;  // bit-reproducible on both sides
  on.alignment_in_gemm1 = true;
  off.alignment_in_gemm1 = false;  // unset is the GPU's default, which derives it on the H100
  FusedMoe f(s, local_gpu(), {}, {}, on), g(s, local_gpu(), {}, {}, off);
  for (std::int64_t M : must_apply) ASSERT_TRUE(f.gemm1_aligns(M)) << "M=" << M;
  std::int64_t max_M = 1;
  for (auto M : batch) max_M = std::max(max_M, M);
  f.prepare(max_M);
  g.prepare(max_M);
  cuda::Stream stream;
  BenchData d;
  make_bench_weights(f, 23, d);
  for (std::int64_t M : batch) {
    make_bench_sets(f, M, 2, std::size_t(1) << 34, 2300 + M, d, stream);  // two routings
    stream.synchronize();
    ASSERT_EQ(d.sets.size(), 2u);
    const bool applies = f.gemm1_aligns(M);
    const std::string what = std::string(to_string(s.dtype)) + " rank " + std::to_string(rank) +
                             " M=" + std::to_string(M) + (applies ? "" : " (align launch: same path)");
    // References: the align launch's layer on each set (its own workspace).
    const std::vector<std::vector<std::uint16_t>> ref = {run_layer(g, d, false, stream, 1, 1, 0),
                                                         run_layer(g, d, false, stream, 1, 1, 1)};
    // Poison the workspace with a value no table holds (0x5A5A5A5A): GEMM1 must write every
    // entry of the tables the alignment would.
    const MoeWorkspaceLayout L = f.workspace_layout(M);
    BenchSet& b = d.sets.at(0);
    b.workspace.fill_u8(0x5A);
    const auto eager = run_layer(f, d, false, stream);
    Alignment got;
    got.sorted_token_ids.resize(static_cast<std::size_t>(L.max_num_tokens_padded));
    got.expert_ids.resize(static_cast<std::size_t>(L.max_num_m_blocks));
    b.workspace.download(got.sorted_token_ids.data(), got.sorted_token_ids.size() * 4,
                         L.sorted_token_ids);
    b.workspace.download(got.expert_ids.data(), got.expert_ids.size() * 4, L.expert_ids);
    b.workspace.download(&got.num_tokens_post_padded, 4, L.num_tokens_post_padded);
    std::vector<std::int32_t> ids(static_cast<std::size_t>(M) * s.topk);
    b.workspace.download(ids.data(), ids.size() * 4, L.topk_ids);
    const Alignment want = align_reference(ids.data(), M, s.topk, s.E, rank, L.BLOCK_SIZE_M);
    // Derived: the reference's tables exactly (each expert's slots ascending in both; every
    // expert_ids entry, -1 past the total, and every row of sorted_token_ids up to the total).
    // The align launch orders an expert's slots as they arrive: the same sets per expert.
    std::string table_diff = compare_alignment(got, want, M, s.topk);
    if (applies && table_diff.empty()) {
      const auto total = static_cast<std::size_t>(want.num_tokens_post_padded);
      if (got.expert_ids != want.expert_ids) table_diff = "expert_ids differ";
      else if (!std::equal(want.sorted_token_ids.begin(), want.sorted_token_ids.begin() + total,
                           got.sorted_token_ids.begin()))
        table_diff = "sorted_token_ids differ (order within an expert)";
    }
    const auto graph = alternating_graph(f, d, stream, 4);
    bool graph_ok = true;
    for (std::size_t i = 0; i < graph.size(); ++i) graph_ok &= graph[i] == ref[i % 2];
    EXPECT_TRUE(table_diff.empty()) << what << ": " << table_diff;
    EXPECT_TRUE(eager == ref[0]) << what << ": output differs from the alignment launch's";
    EXPECT_TRUE(graph_ok) << what << " (graph of calls alternating two routings on one workspace)";
    std::printf("%-5s %-44s tables %s, output %s\n",
                table_diff.empty() && eager == ref[0] && graph_ok ? "ok" : "FAIL", what.c_str(),
                table_diff.empty() ? "as the alignment's" : table_diff.c_str(),
                eager == ref[0] && graph_ok ? "bit-identical" : "differs");
    std::fflush(stdout);
  }
}

TEST_F(MoeAlignInGemm1Gpu, SameOutputAndTablesAsTheAlignLaunch) {
  for (int shape : {0, 1}) {  // Qwen3.5 TP4, DeepSeek-V3 TP8
    const MoeShape s = with_dtype_variant(anchor_check_shapes()[shape].shape, "fp8_block");
    // 5: routing aligns; 6: split-K GEMM1 (neither applies); 7..32: GEMM1 derives it.
    expect_same(s, 0, {5, 6, 7, 8, 12, 16, 24, 32}, {8, 16, 32});
  }
}

TEST_F(MoeAlignInGemm1Gpu, ExpertParallelRankKeepsOnlyItsSlots) {
  MoeShape s = with_dtype_variant(anchor_check_shapes()[1].shape, "fp8_block");  // DeepSeek-V3
  s.E = s.E_global / 2;  // EP 2: this rank holds global experts [E, 2E)
  expect_same(s, 1, {7, 8, 16, 32}, {16, 32});
}

}  // namespace
}  // namespace moetune::moe
