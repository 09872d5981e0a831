// Stage kernels against each other on a GPU, for the block fp8 fusions of the stage kernels:
// the one-kernel activation stage (silu_mul_quant_group) writes the same bytes as silu_mul
// followed by quant_fp8_group, the path it replaced, on random GEMM1 outputs with slots of other
// EP ranks, large values (|x| up to 2^12, where e4m3 saturates without the scale) and a decode
// and a prefill slot count; the routing launches that quantize the hidden states in their spare
// blocks write the quant kernel's bytes and unchanged routing outputs; grouped routing on
// degenerate rows picks the reference's experts; rows full of ties pick them in its order; the
// quant kernel gives the reference's scales and bytes on groups made to catch a wrong amax.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cuda/context.hpp"
#include "cuda/device.hpp"
#include "cuda/driver.hpp"
#include "moe/reference.hpp"
#include "moe/stages.hpp"
#include "moetune/config.hpp"

namespace moetune::moe {
namespace {

TEST(MoeStagesGpu, SiluMulQuantMatchesTheTwoKernels) {
  std::string why;
  if (!cuda::gpu_available(&why)) GTEST_SKIP() << why;
  cuda::Context::get(0);
  const std::string arch = cuda::query_device(0).arch();
  MoeShape s;
  s.E = 64;  // this rank's experts: global ids [64, 128) of 256 (rank 1)
  s.E_global = 256;
  s.N = 384;  // three 128-column groups
  s.K = 1024;
  s.topk = 8;
  s.dtype = Dtype::fp8_w8a8;
  s.block_shape = std::array<int, 2>{128, 128};
  const int rank = 1;
  cuda::Stream stream;
  for (std::int64_t M : {3, 700}) {
    const std::int64_t slots = M * s.topk;
    std::mt19937 rng(static_cast<unsigned>(M));
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    std::vector<std::uint16_t> h(std::size_t(slots) * 2 * s.N);
    for (std::size_t i = 0; i < h.size(); ++i) {
      const double scale = (i % 97 == 0) ? 4096.0 : 4.0;  // a few large values per row
      h[i] = double_to_half_bits(Dtype::bf16, scale * u(rng));
    }
    std::vector<std::int32_t> ids(static_cast<std::size_t>(slots));
    for (auto& id : ids) id = static_cast<std::int32_t>(rng() % s.E_global);  // ~1/4 local
    cuda::DeviceBuffer dh(h.size() * 2), dids(ids.size() * 4), act(std::size_t(slots) * s.N * 2);
    dh.upload(h);
    dids.upload(ids);
    const std::size_t nq = std::size_t(slots) * s.N, ns = std::size_t(slots) * (s.N / 128);
    cuda::DeviceBuffer q2(nq), sc2(ns * 4), q1(nq), sc1(ns * 4), partials(4096);
    q2.fill_u8(0xAA);
    q1.fill_u8(0x55);  // poisoned differently: every byte must be written
    sc2.fill_u32(0x7fc00000u);
    sc1.fill_u32(0xffc00000u);
    launch_silu_mul(s, arch, reinterpret_cast<const void*>(dh.ptr()),
                    reinterpret_cast<void*>(act.ptr()), dids.as<const std::int32_t>(), M, rank,
                    stream);
    launch_quant(s.dtype, 128, arch, reinterpret_cast<const void*>(act.ptr()), slots, s.N,
                 q2.as<std::uint8_t>(), sc2.as<float>(), partials.as<float>(), stream);
    launch_silu_mul_quant(s, arch, reinterpret_cast<const void*>(dh.ptr()), q1.as<std::uint8_t>(),
                          sc1.as<float>(), dids.as<const std::int32_t>(), M, rank, stream);
    stream.synchronize();
    const auto a = q1.download_as<std::uint8_t>(nq), b = q2.download_as<std::uint8_t>(nq);
    const auto sa = sc1.download_as<std::uint32_t>(ns), sb = sc2.download_as<std::uint32_t>(ns);
    std::size_t diff_q = 0, diff_s = 0, nonzero = 0;
    for (std::size_t i = 0; i < nq; ++i) {
      diff_q += a[i] != b[i];
      nonzero += a[i] != 0;
    }
    for (std::size_t i = 0; i < ns; ++i) diff_s += sa[i] != sb[i];
    EXPECT_EQ(diff_q, 0u) << "M=" << M;
    EXPECT_EQ(diff_s, 0u) << "M=" << M;
    EXPECT_GT(nonzero, nq / 8) << "M=" << M;  // the local slots were quantized, not skipped
    std::printf("M=%lld: %zu fp8 bytes and %zu scales identical (%zu nonzero bytes)\n",
                static_cast<long long>(M), nq, ns, nonzero);
  }
}

// Block fp8: the quant kernel's scales and bytes are the fp32 reference's, bit for bit, on groups
// made to catch a wrong warp amax (act::warp_amax, one redux over the bits of |x|): the largest
// magnitude at every lane position and negative, only zeros and -0.0 (scale 1e-10 / 448),
// subnormal bf16, the largest magnitude tied between signs, a NaN beside finite values (the
// amax skips it; its byte is not compared), values that round to e4m3 ties, -0.0 in lanes 0..15
// beside positive lanes (a sign bit reaching the redux would win it). Values are compared, not
// bytes: the reference's e4m3 of a signed zero is not pinned down.
TEST(MoeStagesGpu, QuantKernelMatchesTheReferenceBitForBit) {
  std::string why;
  if (!cuda::gpu_available(&why)) GTEST_SKIP() << why;
  cuda::Context::get(0);
  const std::string arch = cuda::query_device(0).arch();
  constexpr int kGroup = 128, kGroups = 7, kCols = kGroup * kGroups;
  constexpr std::int64_t kRows = 64;
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<std::uint16_t> x(std::size_t(kRows) * kCols);
  std::vector<char> is_nan(x.size(), 0);
  for (std::int64_t r = 0; r < kRows; ++r) {
    for (int g = 0; g < kGroups; ++g) {
      const int peak = static_cast<int>((r * kGroups + g) * 37 % kGroup);  // every lane, in turn
      for (int i = 0; i < kGroup; ++i) {
        const std::size_t at = std::size_t(r) * kCols + std::size_t(g) * kGroup + i;
        double v = 0.0;
        switch (g) {
          case 0: v = i == peak ? -7.5 : 4.0 * u(rng); break;   // a negative peak
          case 1: v = i % 2 ? -0.0 : 0.0; break;                // zeros only
          case 2: v = (i == peak ? 3.0 : 1.0) * 1e-39 * (1 + i % 5); break;  // subnormal bf16
          case 3: v = i == peak ? 2.5 : (i == (peak + 1) % kGroup ? -2.5 : u(rng)); break;
          case 4: v = i == peak ? std::numeric_limits<double>::quiet_NaN() : 64.0 * u(rng); break;
          case 5: v = 448.0 / 1024.0 * std::round(1024.0 * u(rng)); break;  // near ties
          default: v = i < 64 ? -0.0 : (i == 64 + peak % 64 ? 3.0 : 2.0 * std::fabs(u(rng))); break;
        }
        x[at] = double_to_half_bits(Dtype::bf16, v);
        is_nan[at] = std::isnan(v);
      }
    }
  }
  std::vector<double> xd(x.size()), deq(x.size()), ref_scale(std::size_t(kRows) * kGroups);
  for (std::size_t i = 0; i < x.size(); ++i) xd[i] = half_bits_to_double(Dtype::bf16, x[i]);
  quant_fp8_group_reference(xd.data(), kRows, kCols, kGroup, deq.data(), ref_scale.data());

  cuda::Stream stream;
  cuda::DeviceBuffer dx(x.size() * 2), q(x.size()), sc(ref_scale.size() * 4), partials(4096);
  dx.upload(x);
  q.fill_u8(0xAA);
  sc.fill_u32(0x7fc00000u);  // NaN: a scale left unwritten fails the comparison
  launch_quant(Dtype::fp8_w8a8, kGroup, arch, reinterpret_cast<const void*>(dx.ptr()), kRows,
               kCols, q.as<std::uint8_t>(), sc.as<float>(), partials.as<float>(), stream);
  stream.synchronize();
  const auto got_q = q.download_as<std::uint8_t>(x.size());
  const auto got_s = sc.download_as<float>(ref_scale.size());
  int bad_scales = 0, bad_bytes = 0;
  for (std::size_t i = 0; i < ref_scale.size(); ++i) {
    const float want = static_cast<float>(ref_scale[i]);
    if (std::memcmp(&want, &got_s[i], 4) != 0 && ++bad_scales <= 3)
      ADD_FAILURE() << "scale of row " << i / kGroups << " group " << i % kGroups << ": "
                    << got_s[i] << ", reference " << want;
  }
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (is_nan[i]) continue;
    const double got = e4m3_to_double(got_q[i]) * got_s[i / kGroup];
    if (got != deq[i] && ++bad_bytes <= 3)
      ADD_FAILURE() << "element " << i << " (group " << (i % kCols) / kGroup << "): " << got
                    << ", reference " << deq[i];
  }
  EXPECT_EQ(bad_scales, 0);
  EXPECT_EQ(bad_bytes, 0);
  // The groups are what they were made to be: zeros give the floor scale, the peaks set the rest.
  EXPECT_EQ(got_s[1], static_cast<float>(1e-10 / 448.0));
  EXPECT_EQ(got_s[0], static_cast<float>(7.5 / 448.0));
  EXPECT_EQ(got_s[6], static_cast<float>(3.0 / 448.0));
}

// Block fp8: the routing launch's spare blocks quantize the hidden states with the same bits
// as the quant kernel, in moe_routing (M = 700) and in moe_route_align (M = 3), and the routing
// outputs are those of the launch without the quantization.
TEST(MoeStagesGpu, RoutingQuantMatchesTheQuantKernel) {
  std::string why;
  if (!cuda::gpu_available(&why)) GTEST_SKIP() << why;
  cuda::Context::get(0);
  const std::string arch = cuda::query_device(0).arch();
  MoeShape s;
  s.E = s.E_global = 256;
  s.N = 256;
  s.K = 1152;  // nine 128-column groups
  s.topk = 8;
  s.dtype = Dtype::fp8_w8a8;
  s.block_shape = std::array<int, 2>{128, 128};
  cuda::Stream stream;
  for (std::int64_t M : {3, 700}) {
    std::mt19937 rng(static_cast<unsigned>(M + 1));
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    std::vector<std::uint16_t> x(std::size_t(M) * s.K);
    for (std::size_t i = 0; i < x.size(); ++i)
      x[i] = double_to_half_bits(Dtype::bf16, (i % 89 == 0 ? 3000.0 : 2.0) * u(rng));
    std::vector<float> logits(std::size_t(M) * s.E_global);
    for (auto& l : logits) l = static_cast<float>(4 * u(rng));
    cuda::DeviceBuffer dx(x.size() * 2), dl(logits.size() * 4);
    dx.upload(x);
    dl.upload(logits);
    const std::size_t nq = std::size_t(M) * s.K, ns = std::size_t(M) * (s.K / 128),
                      slots = std::size_t(M) * s.topk;
    cuda::DeviceBuffer q1(nq), sc1(ns * 4), q2(nq), sc2(ns * 4), partials(4096);
    cuda::DeviceBuffer ids1(slots * 4), w1(slots * 4), ids2(slots * 4), w2(slots * 4);
    q1.fill_u8(0x55);
    q2.fill_u8(0xAA);
    sc1.fill_u32(0xffc00000u);
    sc2.fill_u32(0x7fc00000u);
    RoutingQuant rq{reinterpret_cast<const void*>(dx.ptr()), q1.as<std::uint8_t>(),
                    sc1.as<float>()};
    if (M <= 4) {
      const std::int64_t mp = max_num_tokens_padded(M, s.topk, s.E, 16),
                         mb = max_num_m_blocks(M, s.topk, s.E, 16);
      cuda::DeviceBuffer sorted(std::size_t(mp) * 4), eids(std::size_t(mb) * 4), ntpp(4);
      launch_route_align(s, 16, arch, dl.as<const float>(), nullptr, ids1.as<std::int32_t>(),
                         w1.as<float>(), M, 0, sorted.as<std::int32_t>(), eids.as<std::int32_t>(),
                         ntpp.as<std::int32_t>(), mp, mb, stream, false, nullptr, 0, nullptr, 0,
                         &rq);
      stream.synchronize();
    } else {
      launch_routing(s, arch, dl.as<const float>(), nullptr, ids1.as<std::int32_t>(),
                     w1.as<float>(), M, stream, false, &rq);
    }
    launch_routing(s, arch, dl.as<const float>(), nullptr, ids2.as<std::int32_t>(), w2.as<float>(),
                   M, stream);
    launch_quant(s.dtype, 128, arch, reinterpret_cast<const void*>(dx.ptr()), M, s.K,
                 q2.as<std::uint8_t>(), sc2.as<float>(), partials.as<float>(), stream);
    stream.synchronize();
    EXPECT_EQ(q1.download_as<std::uint8_t>(nq), q2.download_as<std::uint8_t>(nq)) << "M=" << M;
    EXPECT_EQ(sc1.download_as<std::uint32_t>(ns), sc2.download_as<std::uint32_t>(ns)) << "M=" << M;
    EXPECT_EQ(ids1.download_as<std::int32_t>(slots), ids2.download_as<std::int32_t>(slots));
    EXPECT_EQ(w1.download_as<std::uint32_t>(slots), w2.download_as<std::uint32_t>(slots));
    std::printf("M=%lld: routing+quant gives the quant kernel's %zu fp8 bytes and %zu scales\n",
                static_cast<long long>(M), nq, ns);
  }
}

// Grouped routing on rows whose groups score -inf or NaN (a NaN logit, a group with one finite
// choice and a bias) picks the reference's experts: exactly topk_group groups kept, the smaller
// id first among equal scores, NaN never a group's max. Both kernel paths: groups of whole lane
// columns (256 experts in 8 groups, DeepSeek-V3's routing) and the shared-memory scan (64
// experts in 8 groups of 8); with a correction bias (top-2 sums) and without (group max).
TEST(MoeStagesGpu, GroupedRoutingOnDegenerateRowsMatchesTheReference) {
  std::string why;
  if (!cuda::gpu_available(&why)) GTEST_SKIP() << why;
  cuda::Context::get(0);
  const std::string arch = cuda::query_device(0).arch();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  cuda::Stream stream;
  for (const int E : {256, 64}) {
    for (const bool bias : {true, false}) {
      MoeShape s;
      s.E = s.E_global = E;
      s.N = 256;
      s.K = 1024;
      s.topk = 8;
      s.routing.scoring = "sigmoid";
      s.routing.n_group = 8;
      s.routing.topk_group = 4;
      s.routing.correction_bias = bias;
      const int gsize = E / 8;
      constexpr int M = 5;
      std::vector<float> logits(std::size_t(M) * E);
      for (int t = 0; t < M; ++t) {
        float* row = logits.data() + std::size_t(t) * E;
        for (int e = 0; e < E; ++e) {
          const int g = e / gsize, i = e % gsize;
          switch (t) {
            case 0:  // distinct, well separated: an ordinary row
              row[e] = 0.01f * static_cast<float>((e * 37) % E) - 1.0f;
              break;
            case 1:  // group 0 all equal; groups 1..7 one finite choice (at 3), the rest NaN
              row[e] = g == 0 ? -2.0f : (i == 3 ? 2.0f : nan);
              break;
            case 2:  // every group one finite choice, at a different place in each group
              row[e] = i == (g * 5) % gsize ? 0.5f * g - 1.0f : nan;
              break;
            case 3:  // all NaN
              row[e] = nan;
              break;
            default:  // NaN first in every group, then rising choices
              row[e] = i == 0 ? nan : 0.001f * static_cast<float>(e) - 0.5f;
              break;
          }
        }
      }
      std::vector<float> correction(E, 0.0f);
      correction[E - 1] = -std::numeric_limits<float>::infinity();  // one masked expert
      const std::size_t slots = std::size_t(M) * s.topk;
      cuda::DeviceBuffer dl(logits.size() * 4), db(correction.size() * 4), ids(slots * 4),
          w(slots * 4);
      dl.upload(logits);
      db.upload(correction);
      launch_routing(s, arch, dl.as<const float>(), bias ? db.as<const float>() : nullptr,
                     ids.as<std::int32_t>(), w.as<float>(), M, stream);
      stream.synchronize();
      const auto got = ids.download_as<std::int32_t>(slots);
      const RoutingResult ref = route_reference(logits.data(), M, E, s.topk, s.routing,
                                                bias ? correction.data() : nullptr);
      for (int t = 0; t < M; ++t) {
        std::vector<std::int32_t> a(got.begin() + t * s.topk, got.begin() + (t + 1) * s.topk),
            b(ref.topk_ids.begin() + t * s.topk, ref.topk_ids.begin() + (t + 1) * s.topk);
        std::sort(a.begin(), a.end());
        std::sort(b.begin(), b.end());
        EXPECT_EQ(a, b) << "E=" << E << (bias ? " bias" : " no bias") << " row " << t;
      }
      std::printf("E=%d %s: %d degenerate grouped rows routed as the reference\n", E,
                  bias ? "bias" : "no bias", M);
    }
  }
}

// Rows full of exact ties (logits from a set of four values) pick the reference's experts in
// the reference's order (the larger score, then the smaller id), with its weights: among tied
// heads route_token's picks take the lowest lane's (routing.cuh: a lane's experts are contiguous).
// Softmax (selection on the logits) and sigmoid, top 1..8 of 256, 160, 72, 64 and 20 experts (8,
// 5, 3, 2 and 1 per lane); and grouped sigmoid (8 groups, 4 kept, scored by their best expert:
// groups of 4 lanes, a butterfly over them, except 72's groups of 3 lanes, scanned in shared
// memory). Not with a correction bias: group
// scores are then sums of two, whose fp32 and fp64 roundings can order equal sums differently.
TEST(MoeStagesGpu, RoutingOnTiedRowsMatchesTheReferenceInOrder) {
  std::string why;
  if (!cuda::gpu_available(&why)) GTEST_SKIP() << why;
  cuda::Context::get(0);
  const std::string arch = cuda::query_device(0).arch();
  cuda::Stream stream;
  int rows = 0;
  for (const char* scoring : {"softmax", "sigmoid", "grouped"}) {
    for (const int E : {256, 160, 72, 64, 20}) {
      const bool grouped = std::string(scoring) == "grouped";
      if (grouped && E % 8 != 0) continue;
      for (const int topk : {1, 2, 4, 8}) {
        MoeShape s;
        s.E = s.E_global = E;
        s.N = 256;
        s.K = 1024;
        s.topk = topk;
        s.routing.scoring = grouped ? "sigmoid" : scoring;
        if (grouped) {
          s.routing.n_group = 8;
          s.routing.topk_group = 4;
        }
        constexpr int M = 64;
        std::vector<float> logits(std::size_t(M) * E);
        std::uint32_t h = 12345u + static_cast<std::uint32_t>(E * 31 + topk);
        for (float& v : logits) {
          h = h * 1664525u + 1013904223u;
          v = static_cast<float>((h >> 24) % 4) - 1.5f;  // -1.5, -0.5, 0.5, 1.5
        }
        const std::size_t slots = std::size_t(M) * topk;
        cuda::DeviceBuffer dl(logits.size() * 4), ids(slots * 4), w(slots * 4);
        dl.upload(logits);
        launch_routing(s, arch, dl.as<const float>(), nullptr, ids.as<std::int32_t>(),
                       w.as<float>(), M, stream);
        stream.synchronize();
        const auto got = ids.download_as<std::int32_t>(slots);
        const auto gw = w.download_as<float>(slots);
        const RoutingResult ref = route_reference(logits.data(), M, E, topk, s.routing, nullptr);
        for (std::size_t i = 0; i < slots; ++i) {
          ASSERT_EQ(got[i], ref.topk_ids[i])
              << scoring << " E=" << E << " topk=" << topk << " slot " << i;
          EXPECT_NEAR(gw[i], ref.topk_weights[i], 2e-6 * (1 + std::fabs(ref.topk_weights[i])));
        }
        rows += M;
      }
    }
  }
  std::printf("%d tied rows routed as the reference, in its order\n", rows);
}

}  // namespace
}  // namespace moetune::moe
