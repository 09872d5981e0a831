// Programmatic dependent launch on a GPU (sm_90+; skipped below): the layer with PDL (the
// default there) and without gives bit-identical outputs, eager and captured into a CUDA graph of
// back-to-back calls (where consecutive calls overlap too), for every dtype, decode to prefill
// sizes (at M <= 4 the decode kernels, kernels/moe_decode.cuh) and a split-K table of the stage
// kernels (the alignment, or routing+align in one kernel at M <= 5, zeroes its counters, also on
// a poisoned workspace: those tests turn the decode kernels off, which ignore the GEMM configs).
// Router rows of NaN or -inf still route to real experts. Every layer here keeps the separate
// top-k sum (FusedMoeOptions::topk_sum_in_gemm2 = false): GEMM2's atomic adds land in any order,
// so the folded sum is not bit-reproducible (tests/gpu/test_moe_topk_sum.cpp holds it against
// this path).
// Then a short timing of graph replays with and without PDL, printed for the record (not
// asserted: the GPU decides).
#include <algorithm>
#include <cstdio>
#include <limits>
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
#include "moetune/gpu_spec.hpp"

#include "test_moe_common.hpp"

namespace moetune::moe {
namespace {

using moetune::moe::testing::local_gpu;
using moetune::moe::testing::run_layer;  // 4 calls per graph, replayed twice

class MoePdlGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda::gpu_available(&why)) GTEST_SKIP() << why;
    cuda::Context::get(0);
    const std::string arch = cuda::query_device(0).arch();
    if (!arch_supports_pdl(arch)) GTEST_SKIP() << "PDL needs sm_90+, this GPU is " << arch;
    int v = 0;
    cuda::driver().cuDriverGetVersion(&v);
    std::printf("driver %d, arch %s\n", v, arch.c_str());
  }
};

// decode: FusedMoeOptions::decode_kernels (false: the stage kernels at every M).
void expect_identical(const MoeShape& s, const ConfigTable& up, const char* label,
                      const std::vector<std::int64_t>& batch, bool decode = true) {
  FusedMoeOptions on, off;
  on.decode_kernels = off.decode_kernels = decode;
  on.topk_sum_in_gemm2 = off.topk_sum_in_gemm2 = false;
  off.pdl = false;
  FusedMoe on_moe(s, local_gpu(), up, {}, on), off_moe(s, local_gpu(), up, {}, off);
  ASSERT_TRUE(on_moe.pdl());
  ASSERT_FALSE(off_moe.pdl());
  std::int64_t max_M = 1;
  for (auto M : batch) max_M = std::max(max_M, M);
  on_moe.prepare(max_M);
  off_moe.prepare(max_M);
  cuda::Stream stream;
  BenchData d;
  make_bench_weights(on_moe, 7, d);
  for (std::int64_t M : batch) {
    make_bench_sets(on_moe, M, 1, std::size_t(1) << 34, 1000 + M, d, stream);
    stream.synchronize();
    const auto ref = run_layer(off_moe, d, false, stream);
    const auto off_graph = run_layer(off_moe, d, true, stream);
    const auto on_eager = run_layer(on_moe, d, false, stream);
    const auto on_graph = run_layer(on_moe, d, true, stream);
    std::size_t poisoned = 0;
    for (auto v : ref) poisoned += v == 0xFFFF;
    EXPECT_LT(poisoned, ref.size() / 100 + 1) << label << " M=" << M << ": output not written";
    EXPECT_TRUE(off_graph == ref) << label << " M=" << M << ": graph (no PDL) differs from eager";
    EXPECT_TRUE(on_eager == ref) << label << " M=" << M << ": eager PDL differs";
    EXPECT_TRUE(on_graph == ref) << label << " M=" << M << ": graph PDL differs";
    std::printf("%-5s %-26s M=%-5lld %s\n",
                (on_eager == ref && on_graph == ref && off_graph == ref) ? "ok" : "FAIL", label,
                static_cast<long long>(M), "PDL eager/graph == no-PDL eager/graph");
    std::fflush(stdout);
  }
}

TEST_F(MoePdlGpu, OutputsBitIdenticalEveryDtype) {
  for (const char* dt : {"bf16", "fp16", "fp8_block", "fp8_tensor"}) {
    const MoeShape s = with_dtype_variant(anchor_check_shapes()[0].shape, dt);
    // 1: the decode kernels (fp8_tensor: the stage kernels); 8, 64: the stage kernels' decode
    // path (bf16/fp16 fuse the activation into GEMM1); 257: the unfused path.
    expect_identical(s, {}, dt, {1, 8, 64, 257});
  }
}

// Split-K (stage kernels, decode kernels off): the alignment (or routing+align) zeroes the GEMMs'
// arrival counters (no memset node: the split-K GEMM stays a PDL launch); the counters must be
// zero again after every call.
TEST_F(MoePdlGpu, OutputsBitIdenticalSplitK) {
  const MoeShape bf = with_dtype_variant(anchor_check_shapes()[0].shape, "bf16");
  expect_identical(bf, ConfigTable{{1, KernelConfig{16, 64, 64, 1, 4, 3, 2}}}, "bf16 split-K 2",
                   {1, 8, 64}, false);
  const MoeShape f8 = with_dtype_variant(anchor_check_shapes()[0].shape, "fp8_block");
  expect_identical(f8, ConfigTable{{1, KernelConfig{16, 64, 128, 1, 4, 3, 2}}},
                   "fp8_block split-K 2", {1, 8, 64}, false);
}

// A workspace may hold anything, e.g. another M's data (the layout moves with M): the alignment
// (routing+align at M <= 5) zeroes this call's split-K counters. Poison the workspace (0xFF in
// every byte: every counter -1), run a split-K layer, and compare with the same call on a freshly
// zeroed workspace.
TEST_F(MoePdlGpu, SplitKOnAPoisonedWorkspace) {
  const MoeShape f8 = with_dtype_variant(anchor_check_shapes()[0].shape, "fp8_block");
  // Both GEMMs split (GEMM2's counters are the alignment's second range); the stage kernels at
  // every M (the decode kernels have no split-K counters).
  FusedMoeOptions stages;
  stages.decode_kernels = false;
  stages.topk_sum_in_gemm2 = false;
  FusedMoe fm(f8, local_gpu(), ConfigTable{{1, KernelConfig{16, 64, 128, 1, 4, 3, 2}}},
              ConfigTable{{1, KernelConfig{16, 64, 64, 1, 4, 3, 2}}}, stages);
  fm.prepare(64);
  cuda::Stream stream;
  BenchData d;
  make_bench_weights(fm, 7, d);
  for (std::int64_t M : {64, 1, 4, 5, 8}) {  // 1, 4, 5: routing+align in one kernel; 8: apart
    make_bench_sets(fm, M, 1, std::size_t(1) << 34, 3000 + M, d, stream);
    BenchSet& b = d.sets.at(0);
    FusedMoe::init_workspace(reinterpret_cast<void*>(b.workspace.ptr()), b.workspace.bytes(),
                             stream);
    stream.synchronize();
    const auto ref = run_layer(fm, d, false, stream);
    b.workspace.fill_u8_async(0xFF, stream);
    const auto eager = run_layer(fm, d, false, stream);
    b.workspace.fill_u8_async(0xFF, stream);
    const auto graph = run_layer(fm, d, true, stream);
    EXPECT_TRUE(eager == ref) << "M=" << M << ": poisoned workspace, eager";
    EXPECT_TRUE(graph == ref) << "M=" << M << ": poisoned workspace, graph";
    std::printf("%-5s fp8_block split-K 2, poisoned workspace M=%lld\n",
                (eager == ref && graph == ref) ? "ok" : "FAIL", static_cast<long long>(M));
  }
}

// Degenerate router rows: token 1 all NaN (a NaN logit), token 2 all -inf (every expert
// masked). The routing names TOPK distinct real experts for them, NaN counting as -inf and the
// smaller id winning ties (it once kept a sentinel id whose slot the alignment dropped, so that
// token's top-k sum read a row no GEMM wrote), and every other token keeps its bits. M = 4 runs
// the decode kernels (which route with the same code), 64 and 256 routing and alignment apart.
TEST_F(MoePdlGpu, DegenerateRouterRowsRouteToRealExperts) {
  for (const char* dtype : {"bf16", "fp8_block"}) {
    const MoeShape s = with_dtype_variant(anchor_check_shapes()[0].shape, dtype);
    FusedMoeOptions det;
    det.topk_sum_in_gemm2 = false;
    FusedMoe fm(s, local_gpu(), {}, {}, det);
    fm.prepare(256);
    cuda::Stream stream;
    BenchData d;
    make_bench_weights(fm, 7, d);
    for (std::int64_t M : {4, 64, 256}) {
      make_bench_sets(fm, M, 1, std::size_t(1) << 34, 6000 + M, d, stream);
      stream.synchronize();
      const auto clean = run_layer(fm, d, false, stream);
      const int E = s.E_global;
      std::vector<float> nan_row(E, std::numeric_limits<float>::quiet_NaN());
      std::vector<float> inf_row(E, -std::numeric_limits<float>::infinity());
      d.sets.at(0).logits.upload(nan_row.data(), E * sizeof(float), 1 * E * sizeof(float));
      d.sets.at(0).logits.upload(inf_row.data(), E * sizeof(float), 2 * E * sizeof(float));
      const auto out = run_layer(fm, d, false, stream);
      const MoeWorkspaceLayout L = fm.workspace_layout(M);
      std::vector<std::int32_t> ids(std::size_t(M) * s.topk);
      MOETUNE_CU(cuMemcpyDtoH, ids.data(), d.sets.at(0).workspace.ptr() + L.topk_ids,
                 ids.size() * sizeof(std::int32_t));
      for (std::int64_t t = 0; t < M; ++t) {
        std::vector<std::int32_t> row(ids.begin() + t * s.topk, ids.begin() + (t + 1) * s.topk);
        for (std::int32_t id : row)
          ASSERT_TRUE(id >= 0 && id < E) << dtype << " M=" << M << " token " << t << ": id " << id;
        std::sort(row.begin(), row.end());
        EXPECT_TRUE(std::adjacent_find(row.begin(), row.end()) == row.end())
            << dtype << " M=" << M << " token " << t << ": an expert twice";
      }
      // NaN wins nothing: the NaN row and the -inf row both take experts 0..TOPK-1.
      for (std::int64_t t : {1, 2}) {
        std::vector<std::int32_t> row(ids.begin() + t * s.topk, ids.begin() + (t + 1) * s.topk);
        std::sort(row.begin(), row.end());
        for (int k = 0; k < s.topk; ++k) EXPECT_EQ(row[k], k) << dtype << " M=" << M << " token " << t;
      }
      std::size_t changed = 0;
      for (std::int64_t t = 0; t < M; ++t) {
        if (t == 1 || t == 2) continue;
        for (std::int64_t j = 0; j < s.K; ++j)
          changed += out[t * s.K + j] != clean[t * s.K + j];
      }
      EXPECT_EQ(changed, 0u) << dtype << " M=" << M << ": other tokens' outputs changed";
      std::printf("%-5s %-9s M=%-4lld NaN and -inf router rows: real experts, others unchanged\n",
                  changed == 0 ? "ok" : "FAIL", dtype, static_cast<long long>(M));
      std::fflush(stdout);
    }
  }
}

// Not a pass/fail test: graph replays of kReplayCalls back-to-back layer calls (hot: one set),
// median per-call time with and without PDL, for the next session's record.
TEST_F(MoePdlGpu, TimingPrint) {
  constexpr int kReplayCalls = 50, kReplays = 30;
  for (const char* dt : {"bf16", "fp8_block"}) {
    const MoeShape s = with_dtype_variant(anchor_check_shapes()[0].shape, dt);
    FusedMoeOptions off;
    off.pdl = false;
    FusedMoe on_moe(s, local_gpu()), off_moe(s, local_gpu(), {}, {}, off);
    on_moe.prepare(64);
    off_moe.prepare(64);
    cuda::Stream stream;
    BenchData d;
    make_bench_weights(on_moe, 7, d);
    for (std::int64_t M : {1, 8, 64}) {
      make_bench_sets(on_moe, M, 1, std::size_t(1) << 34, 1000 + M, d, stream);
      stream.synchronize();
      const BenchSet& b = d.sets.at(0);
      double us[2];
      for (int k = 0; k < 2; ++k) {
        const FusedMoe& fm = k == 0 ? on_moe : off_moe;
        cuda::Graph g;
        g.begin_capture(stream);
        for (int i = 0; i < kReplayCalls; ++i)
          fm.forward(b.inputs, d.weights, reinterpret_cast<void*>(b.out.ptr()),
                     reinterpret_cast<void*>(b.workspace.ptr()), b.workspace.bytes(), stream);
        g.end_capture();
        for (int w = 0; w < 3; ++w) g.launch(stream);
        std::vector<double> t;
        cuda::Event e0, e1;
        for (int r = 0; r < kReplays; ++r) {
          e0.record(stream);
          g.launch(stream);
          e1.record(stream);
          e1.synchronize();
          t.push_back(cuda::Event::elapsed_ms(e0, e1) * 1e3 / kReplayCalls);
        }
        std::sort(t.begin(), t.end());
        us[k] = t[t.size() / 2];
      }
      std::printf("timing %-9s M=%-3lld  PDL %7.2f us  no PDL %7.2f us  ratio %.3f\n", dt,
                  static_cast<long long>(M), us[0], us[1], us[0] / us[1]);
      std::fflush(stdout);
    }
  }
}

}  // namespace
}  // namespace moetune::moe
