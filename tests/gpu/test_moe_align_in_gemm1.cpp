// GEMM1 deriving the alignment itself (FusedMoeOptions::alignment_in_gemm1, the sm_90a kernel;
// skipped elsewhere) on a GPU, against the same layer with the alignment launch:
// - the layer's output is the same bits (both with the separate top-k sum, which is
//   bit-reproducible), eager and in a CUDA graph of back-to-back calls (the next call's routing
//   follows GEMM2, whose tables the next GEMM1 rewrites), at every M where it applies, for block
//   fp8 (the only dtype whose decode GEMM1 is the wgmma kernel's) on Qwen3.5 TP4 and
//   DeepSeek-V3 TP8, and at EP rank 1 of 2 (this rank's experts start at E: slots of other
//   ranks must be left out);
// - the tables GEMM1 wrote (sorted_token_ids, expert_ids, num_tokens_post_padded) are the
//   alignment's (moe::compare_alignment against align_reference of the call's topk_ids);
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

void expect_same(const MoeShape& s, int rank, const std::vector<std::int64_t>& batch,
                 const std::vector<std::int64_t>& must_apply) {
  FusedMoeOptions on, off;
  on.rank = off.rank = rank;
  on.decode_kernels = off.decode_kernels = false;
  on.topk_sum_in_gemm2 = off.topk_sum_in_gemm2 = false;  // bit-reproducible on both sides
  on.alignment_in_gemm1 = true;
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
    EXPECT_FALSE(g.gemm1_aligns(M));
    make_bench_sets(f, M, 1, std::size_t(1) << 34, 2300 + M, d, stream);
    stream.synchronize();
    const std::string what = std::string(to_string(s.dtype)) + " rank " + std::to_string(rank) +
                             " M=" + std::to_string(M) + (f.gemm1_aligns(M) ? "" : " (not applied)");
    const auto ref = run_layer(g, d, false, stream);
    // Poison the tables first: GEMM1 must write every entry the alignment would.
    const MoeWorkspaceLayout L = f.workspace_layout(M);
    BenchSet& b = d.sets.at(0);
    b.workspace.fill_u8(0xFF);
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
    const std::string table_diff = compare_alignment(got, want, M, s.topk);
    const auto graph = run_layer(f, d, true, stream);
    EXPECT_TRUE(table_diff.empty()) << what << ": " << table_diff;
    EXPECT_TRUE(eager == ref) << what << ": output differs from the alignment launch's";
    EXPECT_TRUE(graph == ref) << what << " (graph of back-to-back calls)";
    std::printf("%-5s %-36s tables %s, output %s\n",
                table_diff.empty() && eager == ref && graph == ref ? "ok" : "FAIL", what.c_str(),
                table_diff.empty() ? "as the alignment's" : table_diff.c_str(),
                eager == ref && graph == ref ? "bit-identical" : "differs");
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
