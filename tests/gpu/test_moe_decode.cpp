// The decode kernels (kernels/moe_decode.cuh, forward() up to decode_max_tokens tokens) against
// the stage kernels (forward_staged()) on a GPU, with expert parallelism (rank 1 of 2: about
// half the slots belong to the other rank and must add nothing): the same routing bits, outputs
// within the rounding of two fp32 summation orders (fp8: plus an e4m3 step of the re-quantized
// activation here and there), exact zeros for tokens without a local slot, and bit-identical
// outputs from precomputed topk_ids/topk_weights. `moetune check` holds the decode output
// against the fp64 reference at rank 0; this test covers the slots of other ranks and the
// precomputed-ids kernels.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cuda/context.hpp"
#include "cuda/device.hpp"
#include "cuda/driver.hpp"
#include "moe/bench_data.hpp"
#include "moe/check.hpp"
#include "moe/decode.hpp"
#include "moe/reference.hpp"
#include "moetune/fused_moe.hpp"
#include "test_moe_common.hpp"
#include "tests/unit/router_widths.hpp"

namespace moetune::moe {
namespace {

using testing::local_gpu;

std::vector<std::uint16_t> run(const FusedMoe& fm, bool staged, const MoeInputs& in,
                               const BenchData& d, const BenchSet& b, cuda::Stream& stream) {
  const std::size_t n = static_cast<std::size_t>(in.M) * fm.shape().K;
  cuda::DeviceBuffer out(n * 2);
  out.fill_u8(0xFF);  // NaN in bf16 and fp16: every element must be written
  void* o = reinterpret_cast<void*>(out.ptr());
  void* ws = reinterpret_cast<void*>(b.workspace.ptr());
  if (staged)
    fm.forward_staged(in, d.weights, o, ws, b.workspace.bytes(), stream);
  else
    fm.forward(in, d.weights, o, ws, b.workspace.bytes(), stream);
  stream.synchronize();
  return out.download_as<std::uint16_t>(n);
}

TEST(MoeDecodeGpu, MatchesTheStageKernelsWithOtherRanksSlots) {
  std::string why;
  if (!cuda::gpu_available(&why)) GTEST_SKIP() << why;
  cuda::Context::get(0);
  const auto shapes = anchor_check_shapes();
  for (const char* variant : {"bf16", "fp8_block"}) {
    for (int si : {0, 1}) {  // Qwen3.5 TP4 (softmax), DeepSeek-V3 TP8 (grouped sigmoid + bias)
      MoeShape s = with_dtype_variant(shapes[si].shape, variant);
      s.E = s.E_global / 2;  // EP 2: this rank holds global experts [E, 2E)
      // forward() runs them up to 4 tokens (Qwen3.5), 2 (DeepSeek-V3 fp8) or never (DeepSeek-V3
      // bf16, whose stage kernels are faster at every M: decode_max_tokens).
      const std::int64_t max_tokens = moe::decode_max_tokens(s);
      ASSERT_EQ(max_tokens, si == 0 ? 4 : std::string(variant) == "bf16" ? 0 : 2);
      if (max_tokens == 0) continue;
      FusedMoeOptions opts;
      opts.rank = 1;
      opts.topk_sum_in_gemm2 = false;  // the stage side's fixed-order sum (the decode kernels sum
                                       // in their own down kernel either way)
      FusedMoe fm(s, local_gpu(), {}, {}, opts);
      fm.prepare(4);
      cuda::Stream stream;
      BenchData d;
      make_bench_weights(fm, 11 + si, d);
      for (std::int64_t M = 1; M <= max_tokens; ++M) {
        ASSERT_TRUE(fm.uses_decode_kernels(M)) << variant << " " << shapes[si].name;
        make_bench_sets(fm, M, 1, std::size_t(1) << 34, 500 + M, d, stream);
        stream.synchronize();
        BenchSet& b = d.sets.at(0);
        const MoeWorkspaceLayout L = fm.workspace_layout(M);
        const std::size_t slots = static_cast<std::size_t>(M) * s.topk;
        auto ids_of = [&] {
          std::vector<std::int32_t> v(slots);
          b.workspace.download(v.data(), slots * 4, L.topk_ids);
          return v;
        };
        auto weights_of = [&] {
          std::vector<float> v(slots);
          b.workspace.download(v.data(), slots * 4, L.topk_weights);
          return v;
        };
        // A poisoned workspace (the decode kernels need no initial state, and the ids and
        // weights compared below must be theirs, not an earlier call's).
        b.workspace.fill_u8(0xFF);
        const auto out_d = run(fm, false, b.inputs, d, b, stream);
        const auto ids_d = ids_of();
        const auto w_d = weights_of();
        const auto out_s = run(fm, true, b.inputs, d, b, stream);
        const auto ids_s = ids_of();
        const auto w_s = weights_of();
        EXPECT_EQ(ids_d, ids_s) << variant << " M=" << M;
        EXPECT_EQ(std::memcmp(w_d.data(), w_s.data(), slots * 4), 0) << variant << " M=" << M;

        const Dtype act = s.dtype == Dtype::fp16 ? Dtype::fp16 : Dtype::bf16;
        double num = 0, den = 0;
        std::size_t local = 0, zero_tokens = 0, nonfinite = 0;
        for (std::int64_t t = 0; t < M; ++t) {
          bool any = false;
          for (int j = 0; j < s.topk; ++j) {
            const int e = ids_s[t * s.topk + j] - s.E;  // rank 1
            any |= e >= 0 && e < s.E;
            local += e >= 0 && e < s.E;
          }
          for (int k = 0; k < s.K; ++k) {
            const double a = half_bits_to_double(act, out_d[t * s.K + k]);
            const double r = half_bits_to_double(act, out_s[t * s.K + k]);
            nonfinite += !std::isfinite(a);
            if (!any) {
              EXPECT_EQ(a, 0.0) << "token " << t << " has no local slot";
            }
            num += (a - r) * (a - r);
            den += r * r;
          }
          zero_tokens += !any;
        }
        EXPECT_EQ(nonfinite, 0u) << variant << " M=" << M;
        EXPECT_GT(local, 0u);
        EXPECT_LT(local, slots);  // both kinds of slots occur
        const double rel = den > 0 ? std::sqrt(num / den) : 0.0;
        // fp8: the activation is re-quantized from differently rounded fp32 sums (an e4m3 step
        // is 6-12% of one element); bf16: two summation orders and one bf16 rounding each.
        const double tol = s.dtype == Dtype::fp8_w8a8 ? 2e-2 : 5e-3;
        EXPECT_LT(rel, tol) << variant << " " << shapes[si].name << " M=" << M;

        // The same call from precomputed ids and weights: the same kernels' math, same bits.
        cuda::DeviceBuffer pids(slots * 4), pw(slots * 4);
        pids.upload(ids_s);
        pw.upload(w_s);
        MoeInputs pre = b.inputs;
        pre.router_logits = nullptr;
        pre.topk_ids = pids.as<const std::int32_t>();
        pre.topk_weights = pw.as<const float>();
        const auto out_p = run(fm, false, pre, d, b, stream);
        EXPECT_EQ(out_p, out_d) << variant << " M=" << M << ": precomputed ids";
        std::printf("%-9s %-17s M=%lld: %zu of %zu slots local, %zu tokens without one, "
                    "decode vs stage rel. error %.2e\n",
                    variant, shapes[si].name.c_str(), static_cast<long long>(M), local, slots,
                    zero_tokens, rel);
        std::fflush(stdout);
      }
    }
  }
}

// Router widths off the anchors (tests/unit/router_widths.hpp; route_token keeps a lane's
// experts contiguous): the decode kernels route as the stage kernels do, the same ids and weight
// bits, at M = 1 (the bulk path: the up kernel routes the ids alone, 16-byte row loads; the down
// kernel computes the weights, softmax_weight_of_pick where the selection is on the logits) and
// M = 2 (the register path: ids and weights in both kernels).
// Not yet run on a GPU when written (nineteenth session: no device time left).
TEST(MoeDecodeGpu, RoutesAsTheStageKernelsAtOtherRouterWidths) {
  std::string why;
  if (!cuda::gpu_available(&why)) GTEST_SKIP() << why;
  cuda::Context::get(0);
  for (const MoeShape& s : test_support::off_anchor_router_widths()) {
    const int E = s.E_global;
    FusedMoeOptions det;
    det.topk_sum_in_gemm2 = false;  // the stage side's fixed-order sum
    FusedMoe fm(s, local_gpu(), {}, {}, det);
    fm.prepare(2);
    cuda::Stream stream;
    BenchData d;
    make_bench_weights(fm, 31 + E, d);
    for (std::int64_t M = 1; M <= 2; ++M) {
      ASSERT_TRUE(fm.uses_decode_kernels(M)) << "E=" << E << " M=" << M;
      make_bench_sets(fm, M, 1, std::size_t(1) << 34, 700 + M, d, stream);
      stream.synchronize();
      BenchSet& b = d.sets.at(0);
      const MoeWorkspaceLayout L = fm.workspace_layout(M);
      const std::size_t slots = static_cast<std::size_t>(M) * s.topk;
      std::vector<std::int32_t> ids_d(slots), ids_s(slots);
      std::vector<float> w_d(slots), w_s(slots);
      b.workspace.fill_u8(0xFF);
      const auto out_d = run(fm, false, b.inputs, d, b, stream);
      b.workspace.download(ids_d.data(), slots * 4, L.topk_ids);
      b.workspace.download(w_d.data(), slots * 4, L.topk_weights);
      const auto out_s = run(fm, true, b.inputs, d, b, stream);
      b.workspace.download(ids_s.data(), slots * 4, L.topk_ids);
      b.workspace.download(w_s.data(), slots * 4, L.topk_weights);
      EXPECT_EQ(ids_d, ids_s) << "E=" << E << " M=" << M;
      EXPECT_EQ(std::memcmp(w_d.data(), w_s.data(), slots * 4), 0) << "E=" << E << " M=" << M;
      double num = 0, den = 0;
      std::size_t nonfinite = 0;
      for (std::size_t i = 0; i < out_d.size(); ++i) {
        const double a = half_bits_to_double(Dtype::bf16, out_d[i]);
        const double r = half_bits_to_double(Dtype::bf16, out_s[i]);
        nonfinite += !std::isfinite(a);
        num += (a - r) * (a - r);
        den += r * r;
      }
      EXPECT_EQ(nonfinite, 0u) << "E=" << E << " M=" << M;
      const double rel = den > 0 ? std::sqrt(num / den) : 0.0;
      // (E = 1000 runs rank 0 of EP 2: a token whose slots are all rank 1's is 0 in both.)
      EXPECT_LT(rel, 2e-2) << "E=" << E << " M=" << M;  // as the anchors' fp8 above
      std::printf("E=%-4d top%d %s%s M=%lld: decode vs stage rel. error %.2e\n", E, s.topk,
                  s.routing.scoring.c_str(), s.routing.n_group > 1 ? " grouped" : "",
                  static_cast<long long>(M), rel);
      std::fflush(stdout);
    }
  }
}

}  // namespace
}  // namespace moetune::moe
