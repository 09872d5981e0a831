// The persistent GEMM kernel (kernels/moe_gemms_persistent_sm90a.cuh) on a GPU (sm_90a; skipped
// elsewhere): the layer with it against the two stage GEMMs on the same inputs (fp64-checked by
// `moetune check`), at every M it takes on both fp8 anchors, including sizes where GEMM1 tiles
// are split over blocks and m-blocks of one expert are several (skewed routing). Repeated
// launches without the alignment between them (the GEMM phase alone, as the tuner and bench
// time it) and graphs of back-to-back calls give the same bits: the kernel leaves its counters
// zero. A poisoned workspace is fine (the alignment zeroes them).
#include <cmath>
#include <cstring>
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

using moetune::moe::testing::local_gpu;

class MoePersistentGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda::gpu_available(&why)) GTEST_SKIP() << why;
    cuda::Context::get(0);
    if (cuda::query_device(0).arch() != "sm_90a") GTEST_SKIP() << "the kernel is sm_90a only";
  }
};

double bf16_to_double(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// ||a - b|| / ||b|| over the whole output, and whether any value is NaN or poisoned.
double rel_diff(const std::vector<std::uint16_t>& a, const std::vector<std::uint16_t>& b,
                bool* bad) {
  double num = 0, den = 0;
  *bad = false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double x = bf16_to_double(a[i]), y = bf16_to_double(b[i]);
    if (!std::isfinite(x) || !std::isfinite(y)) *bad = true;
    num += (x - y) * (x - y);
    den += y * y;
  }
  return den > 0 ? std::sqrt(num / den) : (num > 0 ? 1.0 : 0.0);
}

struct Runner {
  const FusedMoe& fm;
  BenchData& d;
  cuda::Stream& stream;
  // forward_staged into a poisoned output; graph: `calls` calls captured and replayed twice.
  std::vector<std::uint16_t> layer(int calls = 1, bool graph = false) {
    const BenchSet& b = d.sets.at(0);
    const std::size_t n = static_cast<std::size_t>(d.M) * fm.shape().K;
    cuda::DeviceBuffer out(n * 2);
    out.fill_u8(0xFF);
    auto call = [&] {
      fm.forward_staged(b.inputs, d.weights, reinterpret_cast<void*>(out.ptr()),
                        reinterpret_cast<void*>(b.workspace.ptr()), b.workspace.bytes(), stream);
    };
    if (graph) {
      cuda::Graph g;
      g.begin_capture(stream);
      for (int i = 0; i < calls; ++i) call();
      g.end_capture();
      g.launch(stream);
      g.launch(stream);
    } else {
      for (int i = 0; i < calls; ++i) call();
    }
    stream.synchronize();
    return out.download_as<std::uint16_t>(n);
  }
  // y (GEMM2's output) after `calls` GEMM phases back to back, without the alignment between.
  std::vector<std::uint16_t> gemm_phase_y(int calls) {
    const BenchSet& b = d.sets.at(0);
    const MoeWorkspaceLayout L = fm.workspace_layout(d.M);
    for (int i = 0; i < calls; ++i)
      fm.enqueue_gemm_phase(b.inputs, d.weights, reinterpret_cast<void*>(b.workspace.ptr()),
                            b.workspace.bytes(), stream);
    stream.synchronize();
    const std::size_t n = static_cast<std::size_t>(d.M) * fm.shape().topk * fm.shape().K;
    std::vector<std::uint16_t> all = b.workspace.download_as<std::uint16_t>((L.y / 2) + n);
    return {all.begin() + static_cast<std::ptrdiff_t>(L.y / 2), all.end()};
  }
};

void expect_matches_stage_gemms(const MoeShape& s, const char* label,
                                const std::vector<std::int64_t>& batch) {
  FusedMoeOptions off_opts;
  off_opts.persistent_gemms = false;
  FusedMoe on(s, local_gpu()), off(s, local_gpu(), {}, {}, off_opts);
  std::int64_t max_M = 1;
  for (auto M : batch) max_M = std::max(max_M, M);
  on.prepare(max_M);
  off.prepare(max_M);
  cuda::Stream stream;
  BenchData d;
  make_bench_weights(on, 11, d);
  for (std::int64_t M : batch) {
    ASSERT_TRUE(on.uses_persistent_gemms(M)) << label << " M=" << M;
    ASSERT_FALSE(off.uses_persistent_gemms(M));
    make_bench_sets(on, M, 1, std::size_t(1) << 34, 5000 + M, d, stream);
    stream.synchronize();
    Runner r_on{on, d, stream}, r_off{off, d, stream};
    const auto ref = r_off.layer();
    d.sets.at(0).workspace.fill_u8(0xFF);  // the alignment must zero the kernel's counters
    const auto got = r_on.layer();
    bool bad = false;
    const double diff = rel_diff(got, ref, &bad);
    // Both quantize SiLU·up to e4m3; only the fp32 sum order of split GEMM1 tiles differs, which
    // can move a value by one e4m3 step: ~1e-3 in all, far below check's 5e-2.
    EXPECT_FALSE(bad) << label << " M=" << M << ": NaN or unwritten output";
    EXPECT_LT(diff, 5e-3) << label << " M=" << M;
    const auto again = r_on.layer(2);
    const auto graph = r_on.layer(4, true);
    EXPECT_TRUE(again == got) << label << " M=" << M << ": a second call differs";
    EXPECT_TRUE(graph == got) << label << " M=" << M << ": a graph of 4 calls differs";
    const auto y1 = r_on.gemm_phase_y(1), y3 = r_on.gemm_phase_y(3);
    EXPECT_TRUE(y1 == y3) << label << " M=" << M << ": repeated GEMM phases differ";
    std::printf("%-5s %-22s M=%-3lld rel diff to the stage GEMMs %.2e\n",
                !bad && diff < 5e-3 && again == got && graph == got && y1 == y3 ? "ok" : "FAIL",
                label, static_cast<long long>(M), diff);
    std::fflush(stdout);
  }
}

// Qwen3.5 TP4 (E 256, N 256, K 3072): GEMM1 is 48 units per m-block, 132 blocks: M = 1 leaves
// most blocks without GEMM1 units, M = 3 splits tiles over 2-3 blocks, M = 32 gives blocks
// several m-blocks.
TEST_F(MoePersistentGpu, MatchesTheStageGemmsQwen) {
  const MoeShape s = with_dtype_variant(anchor_check_shapes()[0].shape, "fp8_block");
  expect_matches_stage_gemms(s, "qwen3.5 tp4 fp8", {1, 2, 3, 5, 8, 13, 16, 24, 32});
}

// DeepSeek-V3 TP8 (K 7168: 56 units per GEMM1 tile, 28 GEMM2 items per m-block; grouped
// sigmoid routing).
TEST_F(MoePersistentGpu, MatchesTheStageGemmsDeepSeek) {
  const MoeShape s = with_dtype_variant(anchor_check_shapes()[1].shape, "fp8_block");
  expect_matches_stage_gemms(s, "deepseek-v3 tp8 fp8", {1, 8, 16, 32});
}

// Few experts (E 8 of Qwen3.5's widths): every token's slots crowd onto the same experts, so an
// expert holds several m-blocks and tiles of one m-block go to many blocks.
TEST_F(MoePersistentGpu, MatchesTheStageGemmsFewExperts) {
  MoeShape s = with_dtype_variant(anchor_check_shapes()[0].shape, "fp8_block");
  s.E = s.E_global = 8;
  s.topk = 2;
  s.source = "qwen3.5 widths, 8 experts";
  expect_matches_stage_gemms(s, "8 experts top-2", {1, 8, 32});
}

}  // namespace
}  // namespace moetune::moe
