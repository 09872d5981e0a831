// The sliced GEMM kernel (kernels/moe_gemms_sliced_sm90a.cuh) on a GPU (sm_90a; skipped
// elsewhere): the layer with it against the stage path (GEMM1, GEMM2 folding the top-k sum) on
// the same inputs, at every M it takes on both fp8 anchors (M = 1 with split-K stage GEMMs,
// 5..64, skewed routing where one expert has several m-blocks), and at EP rank 1 of 2, where
// tokens without a local slot must come out as exact zeros. Both sum in bf16 atomics in any
// order, so they are compared within a tolerance, as are repeated calls and graphs of
// back-to-back calls (out is zeroed by the routing launch before the kernel, or by the kernel
// itself, which then leaves its counters zero; out is poisoned before every eager call); a
// poisoned workspace and output are fine (the alignment launch resets the counters, or the
// routing launch where the kernel derives the alignment itself, M * topk <= 256), from router
// logits and from precomputed ids, deriving the alignment and reading its tables. `moetune check
// --sliced` checks the kernel against fp64.
#include <algorithm>
#include <cmath>
#include <optional>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cuda/context.hpp"
#include "cuda/device.hpp"
#include "cuda/driver.hpp"
#include "moe/bench_data.hpp"
#include "moe/check.hpp"
#include "kernels/common/sliced_plan.cuh"
#include "moe/sliced.hpp"
#include "moetune/fused_moe.hpp"

#include "test_moe_common.hpp"

namespace moetune::moe {
namespace {

using moetune::moe::testing::local_gpu;
using moetune::moe::testing::rel_diff;

class MoeSlicedGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda::gpu_available(&why)) GTEST_SKIP() << why;
    cuda::Context::get(0);
    if (cuda::query_device(0).arch() != "sm_90a") GTEST_SKIP() << "the kernel is sm_90a only";
  }
};

// The layer's output through forward_staged() (the stage kernels at every M: forward() takes the
// decode kernels at M <= 4): one eager call, or `calls` graph-captured calls replayed twice.
std::vector<std::uint16_t> run_layer(const FusedMoe& fm, const BenchData& d, bool graph,
                                     cuda::Stream& stream, int calls = 4) {
  return testing::run_layer(fm, d, graph, stream, calls, 2, 0, testing::Entry::kStaged);
}

// Two calls' outputs differ by the order of the bf16 adds into out (2 x topk rows a token on the
// anchors, each add rounded): 5-7e-3 relative (measured on an H100, thirty-third session), as
// the stage path's folded sum against itself (topk adds: ~3-4e-3).
constexpr double kRunToRun = 1e-2;

// skew: route every token's first slot to one expert (several m-blocks of one expert).
// align: the sliced layer's FusedMoeOptions::alignment_in_gemm1 (unset: it derives the alignment
// wherever that fits, M * topk <= 256; false: it reads the alignment launch's tables).
// pairs: the sliced layer's FusedMoeOptions::sliced_pairs (clusters of two blocks).
void expect_matches_stage_path(const MoeShape& s, int rank, const std::vector<std::int64_t>& batch,
                               bool skew = false, std::optional<bool> align = std::nullopt,
                               bool pairs = false) {
  FusedMoeOptions on_opts, off_opts;
  on_opts.sliced_gemms = true;
  on_opts.sliced_pairs = pairs;
  off_opts.sliced_gemms = false;  // unset: the GPU's rule (M = 6..8, 14..24 / 14..20 there)
  on_opts.alignment_in_gemm1 = align;
  on_opts.rank = off_opts.rank = rank;
  FusedMoe on(s, local_gpu(), {}, {}, on_opts), off(s, local_gpu(), {}, {}, off_opts);
  std::int64_t max_M = 1;
  for (auto M : batch) max_M = std::max(max_M, M);
  ASSERT_EQ(on.sliced_pairs(), pairs);
  on.prepare(max_M);
  off.prepare(max_M);
  cuda::Stream stream;
  BenchData d;
  make_bench_weights(on, 21, d);
  const std::string label = std::string(s.source) + (rank > 0 ? " rank 1 of 2" : "") +
                            (pairs ? " (pairs)" : "");
  for (std::int64_t M : batch) {
    ASSERT_TRUE(on.uses_sliced_gemms(M)) << label << " M=" << M;
    ASSERT_FALSE(off.uses_sliced_gemms(M));
    make_bench_sets(on, M, 1, std::size_t(1) << 34, 9000 + M, d, stream);
    if (skew) {  // logits favouring expert 3 for every token: its slots fill several m-blocks
      BenchSet& b = d.sets.at(0);
      ASSERT_NE(b.inputs.router_logits, nullptr);
      const std::size_t n = static_cast<std::size_t>(M) * s.E_global;
      std::vector<float> logits = b.logits.download_as<float>(n);
      for (std::int64_t t = 0; t < M; ++t) logits[t * s.E_global + 3] = 30.f;
      b.logits.upload(logits.data(), n * 4);
    }
    stream.synchronize();
    const auto ref = run_layer(off, d, false, stream);
    // The launch before it (the alignment's, or the routing's where the kernel derives the
    // alignment) must reset the kernel's counters.
    d.sets.at(0).workspace.fill_u8(0xFF);
    const auto got = run_layer(on, d, false, stream);
    const bool derives = on.workspace_layout(M).gemm1_aligns;
    bool bad = false;
    const double diff = rel_diff(got, ref, &bad);
    // Where the stage GEMM1 fuses SiLU·up too, both quantize the same fp32 values to e4m3; the
    // outputs differ by the bf16 roundings of the adds (two partial rows per slot here, one
    // there): a few 1e-3 (measured). Where it does not (split-K at M = 1, n128 tiles at some
    // sizes), its GEMM1 output is rounded to bf16 before SiLU·up: ~1-2e-2 (as the persistent
    // kernel's test), still far inside check's 5e-2 against fp64.
    const bool stage_fuses = gemm1_fuses_act(s, M, off.up_config(M));
    const double tol = stage_fuses ? 1e-2 : 3e-2;
    EXPECT_FALSE(bad) << label << " M=" << M << ": NaN or unwritten output";
    EXPECT_LT(diff, tol) << label << " M=" << M << (stage_fuses ? " (fused)" : " (unfused)");
    // The kernel's counters are zero after it in every mode (the routing launch zeroed them for
    // a layer call that leaves them alone; the GEMM phase's last block resets them), so that a
    // launch with no zeroing launch before it (the GEMM phase alone) finds them so.
    auto counters_left_zero = [&] {
      const MoeWorkspaceLayout L = on.workspace_layout(M);
      if (!L.sliced) return true;
      stream.synchronize();
      const std::size_t i0 = L.sliced_ws / 4;
      const auto w = d.sets.at(0).workspace.download_as<std::int32_t>(
          i0 + static_cast<std::size_t>(sliced_counter_ints()));
      return std::all_of(w.begin() + static_cast<std::ptrdiff_t>(i0), w.end(),
                         [](std::int32_t v) { return v == 0; });
    };
    EXPECT_TRUE(counters_left_zero()) << label << " M=" << M << ": after a layer call";
    // A graph of 4 back-to-back calls, replayed twice, and a second eager call: the same sums
    // (each call zeroes out before adding) but for the order of the adds.
    bool bad_graph = false, bad_again = false;
    const double d_graph = rel_diff(run_layer(on, d, true, stream), got, &bad_graph);
    const double d_again = rel_diff(run_layer(on, d, false, stream), got, &bad_again);
    EXPECT_FALSE(bad_graph || bad_again) << label << " M=" << M;
    EXPECT_LT(d_graph, kRunToRun) << label << " M=" << M << ": a graph of 4 calls";
    EXPECT_LT(d_again, kRunToRun) << label << " M=" << M << ": a second call";
    // The GEMM phase alone (no out, no alignment between: the bench's gemm_us) leaves the
    // counters zero: a layer call after three of them is still right. Each phase's own sum (into
    // y, token rows as out's) is the layer's too, right after a layer call (no routing launch
    // zeroes anything before it).
    double d_phase = 0;
    bool bad_phase = false;
    for (int i = 0; i < 3; ++i) {
      on.enqueue_gemm_phase(d.sets.at(0).inputs, d.weights,
                            reinterpret_cast<void*>(d.sets.at(0).workspace.ptr()),
                            d.sets.at(0).workspace.bytes(), stream);
      if (!on.workspace_layout(M).sliced) continue;
      stream.synchronize();
      const std::size_t y0 = on.workspace_layout(M).y / 2, n = static_cast<std::size_t>(M) * s.K;
      const auto y = d.sets.at(0).workspace.download_as<std::uint16_t>(y0 + n);
      bool b = false;
      d_phase = std::max(d_phase, rel_diff(std::vector<std::uint16_t>(y.begin() + y0, y.end()),
                                           got, &b));
      bad_phase = bad_phase || b;
    }
    EXPECT_TRUE(counters_left_zero()) << label << " M=" << M << ": after GEMM phases";
    EXPECT_FALSE(bad_phase) << label << " M=" << M << ": the GEMM phase's y";
    EXPECT_LT(d_phase, kRunToRun) << label << " M=" << M << ": the GEMM phase's y";
    bool bad_after = false;
    const double d_after = rel_diff(run_layer(on, d, false, stream), got, &bad_after);
    EXPECT_FALSE(bad_after) << label << " M=" << M;
    EXPECT_LT(d_after, kRunToRun) << label << " M=" << M << ": after GEMM phases";
    // EP: a token with no slot on this rank gets exact zeros.
    std::int64_t nonzero_empty = 0;
    if (rank > 0) {
      const auto ids = d.sets.at(0).workspace.download_as<std::int32_t>(
          static_cast<std::size_t>(M) * s.topk);  // topk_ids lead the workspace
      ASSERT_EQ(on.workspace_layout(M).topk_ids, 0u);
      for (std::int64_t t = 0; t < M; ++t) {
        bool local = false;
        for (int j = 0; j < s.topk; ++j) {
          const int e = ids[t * s.topk + j] - rank * s.E;
          local = local || (e >= 0 && e < s.E);
        }
        if (local) continue;
        for (int k = 0; k < s.K; ++k) nonzero_empty += got[t * s.K + k] != 0;
      }
      EXPECT_EQ(nonzero_empty, 0) << label << " M=" << M;
    }
    // From precomputed topk_ids / topk_weights (no routing launch: the alignment launch then
    // zeroes the counters, also where the kernel derives the alignment), poisoned workspace
    // (last: it overwrites the workspace's topk_ids, which the EP check above reads).
    double d_pre = 0;
    {
      BenchSet& b = d.sets.at(0);
      const MoeWorkspaceLayout L = on.workspace_layout(M);
      const std::size_t slots = static_cast<std::size_t>(M) * s.topk;
      cuda::DeviceBuffer pids(slots * 4), pw(slots * 4);
      const auto ids = b.workspace.download_as<std::int32_t>(L.topk_ids / 4 + slots);
      pids.upload(ids.data() + L.topk_ids / 4, slots * 4);
      const auto wts = b.workspace.download_as<float>(L.topk_weights / 4 + slots);
      pw.upload(wts.data() + L.topk_weights / 4, slots * 4);
      MoeInputs pre = b.inputs;
      pre.router_logits = nullptr;
      pre.topk_ids = pids.as<const std::int32_t>();
      pre.topk_weights = pw.as<const float>();
      b.workspace.fill_u8(0xFF);
      cuda::DeviceBuffer o(static_cast<std::size_t>(M) * s.K * 2);
      o.fill_u8(0xFF);
      on.forward_staged(pre, d.weights, reinterpret_cast<void*>(o.ptr()),
                        reinterpret_cast<void*>(b.workspace.ptr()), b.workspace.bytes(), stream);
      stream.synchronize();
      bool bad_pre = false;
      d_pre = rel_diff(o.download_as<std::uint16_t>(static_cast<std::size_t>(M) * s.K), got,
                       &bad_pre);
      EXPECT_FALSE(bad_pre) << label << " M=" << M << ": precomputed ids";
      EXPECT_LT(d_pre, kRunToRun) << label << " M=" << M << ": precomputed ids";
    }
    std::printf("%-5s %-32s M=%-3lld %-7s rel diff to the stage path %.2e (graph %.1e, again "
                "%.1e, precomputed ids %.1e, GEMM phase %.1e)\n",
                !bad && diff < tol && d_graph < kRunToRun && d_again < kRunToRun &&
                        d_after < kRunToRun && d_pre < kRunToRun && nonzero_empty == 0 &&
                        !bad_phase && d_phase < kRunToRun
                    ? "ok"
                    : "FAIL",
                label.c_str(), static_cast<long long>(M), derives ? "derives" : "tables", diff,
                d_graph, d_again, d_pre, d_phase);
    std::fflush(stdout);
  }
}

TEST_F(MoeSlicedGpu, MatchesStagePathQwen) {
  const MoeShape s = with_dtype_variant(anchor_check_shapes()[0].shape, "fp8_block");
  // M = 6..8, 16 and 24: where the H100 SXM's or H200's default takes it.
  expect_matches_stage_path(s, 0, {1, 5, 6, 7, 8, 13, 16, 24, 32, 64});
}

TEST_F(MoeSlicedGpu, MatchesStagePathDeepSeek) {
  const MoeShape s = with_dtype_variant(anchor_check_shapes()[1].shape, "fp8_block");
  expect_matches_stage_path(s, 0, {3, 8, 16, 33});
}

TEST_F(MoeSlicedGpu, SkewedRoutingSeveralMBlocksOfOneExpert) {
  const MoeShape s = with_dtype_variant(anchor_check_shapes()[0].shape, "fp8_block");
  expect_matches_stage_path(s, 0, {16, 32, 40, 64}, true);  // derived at 16, 32
}

TEST_F(MoeSlicedGpu, ReadsTheTablesWhereItCouldDerive) {  // --no-align-in-gemm1
  const MoeShape s = with_dtype_variant(anchor_check_shapes()[0].shape, "fp8_block");
  expect_matches_stage_path(s, 0, {8, 16, 32}, false, false);
}

TEST_F(MoeSlicedGpu, ExpertParallelRankOneOfTwo) {
  MoeShape s = with_dtype_variant(anchor_check_shapes()[1].shape, "fp8_block");
  s.E = s.E_global / 2;  // EP 2: this rank holds global experts [E, 2E)
  expect_matches_stage_path(s, 1, {8, 16});
}

// The pairs instance (N = 256 on both anchors): the same cases.
TEST_F(MoeSlicedGpu, PairsMatchStagePath) {
  const MoeShape q = with_dtype_variant(anchor_check_shapes()[0].shape, "fp8_block");
  const MoeShape d = with_dtype_variant(anchor_check_shapes()[1].shape, "fp8_block");
  expect_matches_stage_path(q, 0, {1, 5, 6, 7, 8, 13, 16, 24, 32, 64}, false, std::nullopt, true);
  expect_matches_stage_path(d, 0, {3, 8, 16, 33}, false, std::nullopt, true);
}

TEST_F(MoeSlicedGpu, PairsSkewedTablesAndExpertParallel) {
  const MoeShape q = with_dtype_variant(anchor_check_shapes()[0].shape, "fp8_block");
  expect_matches_stage_path(q, 0, {16, 32, 40, 64}, true, std::nullopt, true);
  expect_matches_stage_path(q, 0, {8, 16, 32}, false, false, true);
  MoeShape d = with_dtype_variant(anchor_check_shapes()[1].shape, "fp8_block");
  d.E = d.E_global / 2;
  expect_matches_stage_path(d, 1, {8, 16}, false, std::nullopt, true);
}

// MOETUNE_SLICED_TRACE=1 only (a trace build of the kernel, cuda/nvrtc.hpp; skipped otherwise):
// where a sliced layer's time goes on this GPU. Both fp8 anchors, plain and in pairs, M = 8 and
// 16; each time a CUDA graph of two back-to-back layer calls after a 512 MB write (so the
// weights are cold), the second call's stamps (its routing launch waits for the first call's
// sliced kernel, as in bench's graphs). One line per (model, pairs, M, run), µs from the first
// block's entry: when the blocks' PDL waits return (the routing launch's end), the derivation
// (wait to first copy), GEMM1's end, the exits (min / p10 / median / max) and the median
// GEMM1 and GEMM2 phases of a block.
TEST_F(MoeSlicedGpu, TraceWhereTheTimeGoes) {
  const char* knob = std::getenv("MOETUNE_SLICED_TRACE");
  if (knob == nullptr || std::string(knob) != "1")
    GTEST_SKIP() << "MOETUNE_SLICED_TRACE=1 builds and reads the trace";
  namespace sp = sliced_plan;
  cuda::Stream stream;
  cuda::DeviceBuffer flush(std::size_t(512) << 20);
  std::vector<unsigned long long> st(static_cast<std::size_t>(sp::kTraceBlocks) * sp::kTraceStamps);
  auto pct = [](std::vector<double> v, double q) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    return v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
  };
  for (int i : {0, 1}) {
    const MoeShape s = with_dtype_variant(anchor_check_shapes()[i].shape, "fp8_block");
    for (bool pairs : {false, true}) {
      FusedMoeOptions o;
      o.sliced_gemms = true;
      o.sliced_pairs = pairs;
      FusedMoe fm(s, local_gpu(), {}, {}, o);
      fm.prepare(16);
      BenchData d;
      make_bench_weights(fm, 21, d);
      for (std::int64_t M : {8, 16}) {
        make_bench_sets(fm, M, 1, std::size_t(1) << 34, 7000 + M, d, stream);
        stream.synchronize();
        // The instance the layer launched (launch_sliced: derived where the layer says so).
        ASSERT_TRUE(fm.uses_sliced_gemms(M));
        ASSERT_EQ(fm.sliced_pairs(), pairs);
        const auto k = cuda::Jit::instance().get(sliced_spec(
            fm.shape(), fm.arch(), fm.sliced_stages(), fm.workspace_layout(M).gemm1_aligns, pairs));
        const auto [ptr, bytes] = k->global(sp::kTraceSymbol);
        ASSERT_EQ(bytes, st.size() * 8);
        const unsigned grid =
            static_cast<unsigned>(fm.workspace_layout(M).max_num_m_blocks * sp::slices(s.N));
        ASSERT_LE(grid, static_cast<unsigned>(sp::kTraceBlocks));
        // Per SM (%smid) the last exit of its blocks, each run: whether the same SMs are slow.
        std::vector<std::vector<double>> sm_exit(3);
        for (int run = 0; run < 3; ++run) {
          flush.fill_u8(static_cast<std::uint8_t>(run));
          MOETUNE_CU(cuMemsetD8, ptr, 0, bytes);
          (void)testing::run_layer(fm, d, true, stream, 2, 1, 0, testing::Entry::kStaged);
          MOETUNE_CU(cuMemcpyDtoH, st.data(), ptr, bytes);
          auto at = [&](unsigned g, int j) { return st[g * sp::kTraceStamps + j]; };
          unsigned long long t0 = ~0ull;
          for (unsigned g = 0; g < grid; ++g) t0 = std::min(t0, at(g, 0));
          auto us = [&](unsigned long long t) { return 1e-3 * static_cast<double>(t - t0); };
          std::vector<double> wait, derive, g1_end, exit, g1, g2;
          for (unsigned g = 0; g < grid; ++g) {
            ASSERT_NE(at(g, 0), 0u) << g;
            wait.push_back(us(at(g, 1)));
            if (at(g, 4) == 0) continue;  // no m-block: no work
            derive.push_back(us(at(g, 2)) - us(at(g, 1)));
            g1_end.push_back(us(at(g, 3)));
            exit.push_back(us(at(g, 4)));
            const auto sm = static_cast<std::size_t>(at(g, sp::kTraceSmid));
            if (sm_exit[run].size() <= sm) sm_exit[run].resize(sm + 1, -1.0);
            sm_exit[run][sm] = std::max(sm_exit[run][sm], exit.back());
            g1.push_back(us(at(g, 3)) - us(at(g, 2)));
            g2.push_back(us(at(g, 4)) - us(at(g, 3)));
          }
          ASSERT_FALSE(exit.empty());
          std::printf("trace %-20s %-5s M=%-2lld run %d: %zu of %u blocks; waits return %.2f / "
                      "%.2f / %.2f; derivation %.2f / %.2f; GEMM1 ends %.2f / %.2f / %.2f; exits "
                      "%.2f / %.2f / %.2f / %.2f; GEMM1 %.2f, GEMM2 %.2f (median)\n",
                      std::string(s.source).c_str(), pairs ? "pairs" : "plain",
                      static_cast<long long>(M), run,
                      exit.size(), grid, pct(wait, 0), pct(wait, 0.5), pct(wait, 1),
                      pct(derive, 0.5), pct(derive, 1), pct(g1_end, 0), pct(g1_end, 0.5),
                      pct(g1_end, 1), pct(exit, 0), pct(exit, 0.1), pct(exit, 0.5), pct(exit, 1),
                      pct(g1, 0.5), pct(g2, 0.5));
          std::fflush(stdout);
        }
        // Pearson correlation of the SMs' last exits, runs 1 and 2 against run 0 (SMs with
        // work in both), and run 0's ten slowest SMs.
        auto corr = [&](int r) {
          std::vector<double> a, b;
          for (std::size_t sm = 0; sm < std::min(sm_exit[0].size(), sm_exit[r].size()); ++sm)
            if (sm_exit[0][sm] >= 0 && sm_exit[r][sm] >= 0)
              a.push_back(sm_exit[0][sm]), b.push_back(sm_exit[r][sm]);
          const double n = static_cast<double>(a.size());
          double ma = 0, mb = 0, sab = 0, saa = 0, sbb = 0;
          for (std::size_t i = 0; i < a.size(); ++i) ma += a[i] / n, mb += b[i] / n;
          for (std::size_t i = 0; i < a.size(); ++i) {
            sab += (a[i] - ma) * (b[i] - mb);
            saa += (a[i] - ma) * (a[i] - ma);
            sbb += (b[i] - mb) * (b[i] - mb);
          }
          return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : 0.0;
        };
        std::vector<std::pair<double, std::size_t>> slow;
        for (std::size_t sm = 0; sm < sm_exit[0].size(); ++sm)
          if (sm_exit[0][sm] >= 0) slow.emplace_back(-sm_exit[0][sm], sm);
        std::sort(slow.begin(), slow.end());
        std::string ten;
        for (std::size_t i = 0; i < std::min<std::size_t>(10, slow.size()); ++i)
          ten += " " + std::to_string(slow[i].second);
        std::printf("trace %-20s %-5s M=%-2lld SMs' last exits, correlation with run 0: run 1 "
                    "%.2f, run 2 %.2f; run 0's slowest SMs:%s\n",
                    std::string(s.source).c_str(), pairs ? "pairs" : "plain",
                    static_cast<long long>(M), corr(1), corr(2), ten.c_str());
        std::fflush(stdout);
      }
    }
  }
}

}  // namespace
}  // namespace moetune::moe
