// The sliced GEMM kernel's host side and plan (no GPU): which shapes and sizes take it, its shared
// memory and ring depth, the layer's use of it (when asked, or by default where its blocks fit one
// wave on the H100 SXM and H200, or 1.5..2.2 / 2.0 waves with two slices; never for a
// bit-reproducible output; deriving the alignment where that fits, else with the align launch; its
// counters in a workspace that never shrinks), the launch's refusals, and (NVRTC) that both
// instances compile without spills on both fp8 anchors.
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/common/sliced_plan.cuh"
#include "moe/check.hpp"
#include "moe/reference.hpp"
#include "moe/sliced.hpp"
#include "moe/stages.hpp"
#include "moetune/error.hpp"
#include "moetune/fused_moe.hpp"
#include "moetune/gpu_spec.hpp"
#include "nvrtc_test.hpp"

namespace moetune::moe {
namespace {
namespace sp = sliced_plan;

MoeShape anchor(int i, const char* dtype) {
  return with_dtype_variant(anchor_check_shapes()[i].shape, dtype);
}

TEST(MoeSliced, TakesBlockFp8ShapesItSlices) {
  EXPECT_EQ(sliced_unfit(anchor(0, "fp8_block")), "");  // Qwen3.5 TP4: N = 256, 2 slices
  EXPECT_EQ(sliced_unfit(anchor(1, "fp8_block")), "");  // DeepSeek-V3 TP8
  EXPECT_NE(sliced_unfit(anchor(0, "bf16")), "");
  EXPECT_NE(sliced_unfit(anchor(0, "fp8_tensor")), "");
  EXPECT_NE(sliced_unfit(anchor(2, "fp8_block")).find("N must be at most 512"),
            std::string::npos);  // Mixtral TP2: N = 7168, 56 slices
  MoeShape s = anchor(0, "fp8_block");
  s.block_shape = std::array<int, 2>{128, 64};
  EXPECT_NE(sliced_unfit(s).find("block_k"), std::string::npos);
  s = anchor(0, "fp8_block");
  s.N = 192;
  EXPECT_NE(sliced_unfit(s).find("N must"), std::string::npos);
  s.N = 512;
  EXPECT_EQ(sliced_unfit(s), "");
  s = anchor(0, "fp8_block");
  s.K = 3200;  // a multiple of 128, not of 256
  EXPECT_NE(sliced_unfit(s).find("K must"), std::string::npos);
  EXPECT_THROW(sliced_spec(anchor(0, "bf16"), "sm_90a", 4), InputError);
  const cuda::KernelSpec k = sliced_spec(anchor(0, "fp8_block"), "sm_90a", 3);
  EXPECT_EQ(k.name, "moe_gemms_sliced_fp8b128x128_k3072_n256_top8_s3");
}

TEST(MoeSliced, SharedMemoryAndStages) {
  // Ring slots of 36 KB, the activation tile, two staged output tiles and the small tables:
  // five slots fit an H100 / H200 block's 227 KB (six do not), two fit two blocks per SM.
  EXPECT_EQ(sp::kStageBytes, 36 * 1024);
  EXPECT_EQ(sp::smem_bytes(4) - sp::smem_bytes(3), sp::kStageBytes + sp::kSlotScales * 4 + 16);
  EXPECT_LE(sp::smem_bytes(sp::kMaxStages), 227 * 1024);
  EXPECT_GT(sp::smem_bytes(sp::kMaxStages + 1), 227 * 1024);
  EXPECT_LE(2 * sp::smem_bytes(2), 228 * 1024);
  EXPECT_EQ(sliced_stages(227 * 1024), kSlicedStages);
  EXPECT_EQ(sliced_stages(sp::smem_bytes(kSlicedStages) - 1), kSlicedStages - 1);
  EXPECT_EQ(sliced_stages(sp::smem_bytes(2) - 1), 0);
}

TEST(MoeSliced, AppliesAtDecodeSizesOnSm90a) {
  const MoeShape q = anchor(0, "fp8_block");
  for (std::int64_t M : {1, 8, 16, 64}) EXPECT_TRUE(sliced_applies(q, M, "sm_90a", 16, 4)) << M;
  EXPECT_FALSE(sliced_applies(q, 0, "sm_90a", 16, 4));
  EXPECT_FALSE(sliced_applies(q, kSlicedMaxTokens + 1, "sm_90a", 16, 4));
  EXPECT_FALSE(sliced_applies(q, 8, "sm_90", 16, 4));  // no wgmma
  EXPECT_FALSE(sliced_applies(q, 8, "sm_100a", 16, 4));
  EXPECT_FALSE(sliced_applies(q, 8, "sm_90a", 64, 4));  // another alignment
  EXPECT_FALSE(sliced_applies(q, 8, "sm_90a", 16, 0));  // no ring fits
  EXPECT_FALSE(sliced_applies(anchor(0, "bf16"), 8, "sm_90a", 16, 4));
}

TEST(MoeSliced, LayerUsesItWhenAskedAndNeverWhenRefused) {
  const GpuSpec& h200 = require_gpu("NVIDIA H200");
  const MoeShape q = anchor(0, "fp8_block");
  FusedMoeOptions o, refused;
  o.sliced_gemms = true;
  refused.sliced_gemms = false;
  FusedMoe on(q, h200, {}, {}, o), off(q, h200, {}, {}, refused), def(q, h200);
  for (std::int64_t M : {1, 8, 16, 64}) {
    EXPECT_TRUE(on.uses_sliced_gemms(M)) << M;
    EXPECT_FALSE(off.uses_sliced_gemms(M)) << M;
    EXPECT_EQ(def.uses_sliced_gemms(M), M == 8 || M == 16) << M;  // the default (see below)
    // Never where out must be bit-reproducible (its adds land in any order): asked for, an
    // InputError naming sliced_gemms; by default, not taken.
    FusedMoeOptions det;
    det.topk_sum_in_gemm2 = false;
    {
      FusedMoeOptions both = det;
      both.sliced_gemms = true;
      try {
        FusedMoe fm(q, h200, {}, {}, both);
        ADD_FAILURE() << "sliced_gemms true with topk_sum_in_gemm2 false was accepted";
      } catch (const InputError& e) {
        EXPECT_EQ(e.field(), "sliced_gemms");
      }
    }
    const FusedMoe deterministic(q, h200, {}, {}, det);
    EXPECT_FALSE(deterministic.uses_sliced_gemms(M)) << M;
    // and its workspace is the stage path's (a test may run both on one set of buffers)
    EXPECT_EQ(deterministic.workspace_bytes(M), off.workspace_bytes(M)) << M;
    EXPECT_EQ(deterministic.workspace_layout(M).sliced_ws, 0u) << M;
    const MoeWorkspaceLayout L = on.workspace_layout(M);
    EXPECT_TRUE(L.sliced) << M;
    // It derives the alignment (the routing launch zeroes its counters) where that fits:
    // M * topk <= 256, and not where the routing launch aligns (M <= 5).
    EXPECT_EQ(L.gemm1_aligns, M == 8 || M == 16) << M;
    EXPECT_GE(L.total, L.sliced_ws + sliced_counter_ints() * 4u);
    EXPECT_FALSE(off.workspace_layout(M).sliced);
  }
  EXPECT_TRUE(on.workspace_layout(32).gemm1_aligns);   // 256 slots
  EXPECT_FALSE(on.workspace_layout(33).gemm1_aligns);  // 264: the tables
  FusedMoeOptions no_align = o;
  no_align.alignment_in_gemm1 = false;
  EXPECT_FALSE(FusedMoe(q, h200, {}, {}, no_align).workspace_layout(8).gemm1_aligns);
  EXPECT_TRUE(FusedMoe(q, h200, {}, {}, no_align).workspace_layout(8).sliced);
  EXPECT_FALSE(on.uses_sliced_gemms(kSlicedMaxTokens + 1));
  EXPECT_FALSE(on.workspace_layout(kSlicedMaxTokens + 1).sliced);
  std::size_t prev = 0;
  for (std::int64_t M = 1; M <= 300; ++M) {  // the workspace never shrinks as M grows
    const std::size_t t = on.workspace_bytes(M);
    EXPECT_GE(t, prev) << M;
    prev = t;
  }
  // An arch without wgmma never takes it; the persistent kernel, when asked too, wins.
  FusedMoeOptions a = o;
  a.arch = "sm_89";
  EXPECT_FALSE(FusedMoe(q, h200, {}, {}, a).uses_sliced_gemms(8));
  FusedMoeOptions p = o;
  p.persistent_gemms = true;
  const FusedMoe both(q, h200, {}, {}, p);
  EXPECT_TRUE(both.uses_persistent_gemms(8));
  EXPECT_FALSE(both.uses_sliced_gemms(8));
  EXPECT_TRUE(both.uses_sliced_gemms(64));  // past the persistent kernel's 32 tokens
}

TEST(MoeSliced, DefaultOnTheH100AndH200WhereItsBlocksFillTheirWaves) {
  // moetune_default_sliced_gemms: the H100 SXM and the H200 only; both anchors (E = 256,
  // topk 8, N = 256: two slices) at M = 6..8, where the kernel derives the alignment (M <= 5:
  // the routing launch aligns) and its blocks fit the 132 SMs with a standard deviation to
  // spare (M = 9: 141), and again where a second wave is at least half full: from M = 14
  // (1.51 waves; M = 13: 1.43) to M = 24 on the H100 (2.19; 25: 2.25) and 20 on the H200
  // (1.94; 21: 2.01).
  const GpuSpec& h100 = require_gpu("NVIDIA H100 80GB HBM3");
  const GpuSpec& h200 = require_gpu("NVIDIA H200");
  const GpuSpec& pcie = require_gpu("NVIDIA H100 PCIe");
  for (int i : {0, 1}) {
    const MoeShape s = anchor(i, "fp8_block");
    const FusedMoe def(s, h100), h200_def(s, h200);
    for (std::int64_t M = 1; M <= 70; ++M) {
      const bool one_wave = M >= 6 && M <= 8;
      const bool h100_want = one_wave || (M >= 14 && M <= 24);
      const bool h200_want = one_wave || (M >= 14 && M <= 20);
      EXPECT_EQ(def.uses_sliced_gemms(M), h100_want) << s.source << " M=" << M;
      EXPECT_EQ(h200_def.uses_sliced_gemms(M), h200_want) << s.source << " M=" << M;
      if (h100_want) {
        EXPECT_TRUE(def.workspace_layout(M).gemm1_aligns) << M;
      }
      if (h200_want) {
        EXPECT_TRUE(h200_def.workspace_layout(M).gemm1_aligns) << M;
      }
    }
    for (const GpuSpec* g : {&h100, &h200}) {
      EXPECT_TRUE(moetune_default_sliced_gemms(*g, s, 8)) << g->name;
      EXPECT_FALSE(moetune_default_sliced_gemms(*g, s, 9)) << g->name;
      EXPECT_FALSE(moetune_default_sliced_gemms(*g, s, 13)) << g->name;
      EXPECT_TRUE(moetune_default_sliced_gemms(*g, s, 14)) << g->name;
      EXPECT_TRUE(moetune_default_sliced_gemms(*g, s, 20)) << g->name;
    }
    EXPECT_TRUE(moetune_default_sliced_gemms(h100, s, 24));
    EXPECT_FALSE(moetune_default_sliced_gemms(h100, s, 25));
    EXPECT_FALSE(moetune_default_sliced_gemms(h200, s, 21));
    EXPECT_FALSE(moetune_default_sliced_gemms(pcie, s, 6));  // sm_90a too, but not measured
    EXPECT_FALSE(moetune_default_sliced_gemms(pcie, s, 16));
    EXPECT_FALSE(FusedMoe(s, pcie).uses_sliced_gemms(6));
    FusedMoeOptions off, no_align;
    off.sliced_gemms = false;
    no_align.alignment_in_gemm1 = false;  // the default was measured deriving it only
    EXPECT_FALSE(FusedMoe(s, h100, {}, {}, off).uses_sliced_gemms(8));
    EXPECT_FALSE(FusedMoe(s, h100, {}, {}, no_align).uses_sliced_gemms(8));
    EXPECT_FALSE(FusedMoe(s, h100, {}, {}, no_align).uses_sliced_gemms(16));
  }
  // Four slices (N = 512): twice the blocks, so one wave holds fewer tokens (M <= 3).
  MoeShape wide = anchor(0, "fp8_block");
  wide.N = 512;
  EXPECT_TRUE(moetune_default_sliced_gemms(h100, wide, 3));
  EXPECT_FALSE(moetune_default_sliced_gemms(h100, wide, 5));
  EXPECT_FALSE(moetune_default_sliced_gemms(h100, anchor(0, "fp8_block"), 0));
  // The second-wave band was measured with two slices only: wider shapes keep one wave, also
  // where their blocks would come to 1.5..2.2 waves (N = 512 at M = 6..9, N = 384 at 10..19).
  MoeShape three = anchor(0, "fp8_block");
  three.N = 384;
  for (const GpuSpec* g : {&h100, &h200}) {
    for (int M = 6; M <= 9; ++M) EXPECT_FALSE(moetune_default_sliced_gemms(*g, wide, M)) << M;
    EXPECT_TRUE(moetune_default_sliced_gemms(*g, three, 5)) << g->name;  // one wave: 0.99
    for (int M = 6; M <= 24; ++M) EXPECT_FALSE(moetune_default_sliced_gemms(*g, three, M)) << M;
  }
}

TEST(MoeSliced, RingSlotsFromTheOptions) {
  // 4 by default; 2..5 asked for (--sliced-stages), fewer where the shared memory holds fewer;
  // anything else refused naming sliced_stages; none where the kernel cannot run.
  const GpuSpec& h200 = require_gpu("NVIDIA H200");
  const MoeShape q = anchor(0, "fp8_block");
  EXPECT_EQ(FusedMoe(q, h200).sliced_stages(), 4);
  for (int want : {2, 3, 5}) {
    FusedMoeOptions o;
    o.sliced_stages = want;
    EXPECT_EQ(FusedMoe(q, h200, {}, {}, o).sliced_stages(), want);
  }
  GpuSpec small = h200;  // room for three 36 KB slots and the rest, not five
  small.smem_per_block_bytes = sliced_plan::smem_bytes(3);
  FusedMoeOptions five;
  five.sliced_stages = 5;
  EXPECT_EQ(FusedMoe(q, small, {}, {}, five).sliced_stages(), 3);
  for (int bad : {1, 6, -1}) {
    FusedMoeOptions o;
    o.sliced_stages = bad;
    try {
      FusedMoe m(q, h200, {}, {}, o);
      ADD_FAILURE() << "sliced_stages " << bad << " was accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(e.field(), "sliced_stages") << bad;
    }
  }
  FusedMoeOptions off;
  off.sliced_gemms = false;
  EXPECT_EQ(FusedMoe(q, h200, {}, {}, off).sliced_stages(), 0);
  EXPECT_EQ(FusedMoe(anchor(0, "bf16"), h200).sliced_stages(), 0);
}

TEST(MoeSliced, LayerKernelsNamesWhatForwardRuns) {
  // What bench and profile report per M: the decode kernels at M <= decode_max_tokens, the
  // sliced kernel at M = 6..8 and 14..20 by default on the H200 (a table whose up BLOCK_SIZE_M
  // is not 16 keeps the stage kernels there), else the stage kernels; the persistent kernel
  // when asked.
  const GpuSpec& h200 = require_gpu("NVIDIA H200");
  const MoeShape q = anchor(0, "fp8_block");
  const FusedMoe def(q, h200);
  for (std::int64_t M = 1; M <= 32; ++M) {
    const std::string want = def.uses_decode_kernels(M)                  ? "decode"
                             : (M >= 6 && M <= 8) || (M >= 14 && M <= 20) ? "sliced"
                                                                          : "stages";
    EXPECT_EQ(def.layer_kernels(M), want) << M;
  }
  EXPECT_STREQ(def.layer_kernels(1), "decode");
  EXPECT_STREQ(def.layer_kernels(8), "sliced");
  EXPECT_STREQ(def.layer_kernels(9), "stages");
  FusedMoeOptions no_decode, p;
  no_decode.decode_kernels = false;
  p.persistent_gemms = true;
  EXPECT_STREQ(FusedMoe(q, h200, {}, {}, no_decode).layer_kernels(1), "stages");
  EXPECT_STREQ(FusedMoe(q, h200, {}, {}, p).layer_kernels(8), "persistent");
  // A table with BLOCK_SIZE_M 32 at M = 8: the sliced kernel cannot take its alignment.
  ConfigTable up;
  KernelConfig c = moetune_default_config(q, h200, 8);
  c.BLOCK_SIZE_M = 32;
  up[8] = c;
  EXPECT_STREQ(FusedMoe(q, h200, up, {}).layer_kernels(8), "stages");
}

TEST(MoeSliced, LaunchRefusesMissingOrMisalignedPointers) {
  SlicedArgs a;
  a.M = 8;
  a.max_m_blocks = 64;
  auto field_of = [&](const SlicedArgs& args, int stages) -> std::string {
    try {
      launch_sliced(anchor(0, "fp8_block"), "sm_90a", stages, args, nullptr, false);
    } catch (const InputError& e) {
      return e.field();
    }
    return "";
  };
  EXPECT_EQ(field_of(a, 4), "out");
  alignas(16) static unsigned char buf[64];
  a.out = buf + 2;  // 2-byte aligned bf16, not 16
  std::int32_t counters[3] = {};
  a.counters = counters;
  EXPECT_EQ(field_of(a, 4), "out");
  a.counters = nullptr;
  a.out = buf;
  EXPECT_EQ(field_of(a, 4), "counters");
  a.out_zeroed = true;  // out zeroed by the launch before: no counters needed, so the next
  EXPECT_EQ(field_of(a, 4), "sorted_token_ids");  // check down the list is the one to refuse
  a.out_zeroed = false;
  a.counters = counters;
  EXPECT_EQ(field_of(a, 7), "stages");
  EXPECT_EQ(field_of(a, sp::kMaxStages + 1), "stages");  // 6: its 36 KB slots do not fit
  a.max_m_blocks = 0;
  EXPECT_EQ(field_of(a, 4), "max_m_blocks");
  a.max_m_blocks = 64;
  EXPECT_EQ(field_of(a, 4), "sorted_token_ids");  // neither the tables nor topk_ids
  std::int32_t ids[1] = {};
  a.topk_ids = ids;
  a.M = 33;  // 264 slots: past what the derivation holds
  EXPECT_EQ(field_of(a, 4), "M");
}

// The routing launch zeroes the kernel's counters where it derives the alignment: a range it
// cannot zero is refused before any launch.
TEST(MoeSliced, RoutingRefusesABadZeroRange) {
  const MoeShape q = anchor(0, "fp8_block");  // softmax routing, no correction bias
  auto field_of = [&](std::int32_t* zero, int n) -> std::string {
    try {
      launch_routing(q, "sm_90a", nullptr, nullptr, nullptr, nullptr, 8, nullptr, false, nullptr,
                     zero, n);
    } catch (const InputError& e) {
      return e.field();
    }
    return "";
  };
  std::int32_t counters[3] = {};
  EXPECT_EQ(field_of(counters, -1), "zero_n");
  EXPECT_EQ(field_of(nullptr, 3), "zero_n");
}

// Where the sliced kernel derives the alignment after the routing launch, that launch zeroes
// out for it: a routing stage given no out is refused before any launch (no GPU here), rather
// than leave gemm1 adding into an unzeroed out. Without the sliced kernel routing ignores out.
TEST(MoeSliced, RoutingStageNeedsOutWhereItZeroesItForTheKernel) {
  const GpuSpec& h200 = require_gpu("NVIDIA H200");
  const MoeShape q = anchor(0, "fp8_block");
  FusedMoeOptions off;
  off.sliced_gemms = false;
  const FusedMoe on(q, h200), stage(q, h200, {}, {}, off);
  ASSERT_TRUE(on.uses_sliced_gemms(8));
  ASSERT_TRUE(on.workspace_layout(8).gemm1_aligns);
  std::vector<char> fake(on.workspace_layout(8).total + 256);
  MoeInputs in;
  in.M = 8;
  in.hidden = fake.data();
  in.router_logits = reinterpret_cast<const float*>(fake.data());
  std::string field;
  try {
    on.enqueue_stage(MoeStage::routing, in, MoeWeights{}, nullptr, fake.data(), fake.size(),
                     nullptr);
  } catch (const InputError& e) {
    field = e.field();
  }
  EXPECT_EQ(field, "out");
  // The stage path's routing takes a null out (then fails only for want of a GPU, if at all).
  try {
    stage.enqueue_stage(MoeStage::routing, in, MoeWeights{}, nullptr, fake.data(), fake.size(),
                        nullptr);
  } catch (const InputError& e) {
    ADD_FAILURE() << "stage path's routing refused " << e.field();
  } catch (const std::exception&) {
  }
}

// Where the kernel takes out zeroed, the routing launch zeroes out in 16-byte stores: a range
// that is null, misaligned or not whole vectors is refused before any launch.
TEST(MoeSliced, RoutingRefusesABadOutputRange) {
  const MoeShape q = anchor(0, "fp8_block");
  auto field_of = [&](void* out, std::size_t bytes) -> std::string {
    try {
      launch_routing(q, "sm_90a", nullptr, nullptr, nullptr, nullptr, 8, nullptr, false, nullptr,
                     nullptr, 0, out, bytes);
    } catch (const InputError& e) {
      return e.field();
    }
    return "";
  };
  alignas(16) static unsigned char buf[64];
  EXPECT_EQ(field_of(nullptr, 32), "zero_out");
  EXPECT_EQ(field_of(buf + 8, 32), "zero_out");  // 8-byte aligned
  EXPECT_EQ(field_of(buf, 24), "zero_bytes");    // a vector and a half
}

TEST(MoeSliced, DerivingInstanceIsItsOwnKernel) {
  const MoeShape q = anchor(0, "fp8_block");
  EXPECT_TRUE(sliced_derives_alignment(q, 32));
  EXPECT_FALSE(sliced_derives_alignment(q, 33));
  EXPECT_FALSE(sliced_derives_alignment(q, 0));
  const cuda::KernelSpec d = sliced_spec(q, "sm_90a", 4, true);
  EXPECT_EQ(d.name, "moe_gemms_sliced_fp8b128x128_k3072_n256_top8_s4_ia256");
  EXPECT_NE(d.name, sliced_spec(q, "sm_90a", 4).name);
  auto arg = [](const cuda::KernelSpec& k, const std::string& name) {
    for (const auto& a : k.template_args)
      if (a.first == name) return a.second;
    return std::string("(none)");
  };
  EXPECT_EQ(arg(d, "ALIGN_E"), "256");
  EXPECT_EQ(arg(sliced_spec(q, "sm_90a", 4), "ALIGN_E"), "0");
  EXPECT_EQ(arg(d, "PAIR"), "0");
  // Pairs: an instance of its own, for N = 256 only.
  const cuda::KernelSpec p = sliced_spec(q, "sm_90a", 4, true, true);
  EXPECT_EQ(arg(p, "PAIR"), "1");
  EXPECT_EQ(p.name, d.name + "_pair");
  EXPECT_TRUE(sliced_pairs_fit(q));
  MoeShape wide = q;
  wide.N = 512;
  EXPECT_FALSE(sliced_pairs_fit(wide));
  EXPECT_THROW(sliced_spec(wide, "sm_90a", 4, true, true), InputError);
  EXPECT_NO_THROW(sliced_spec(wide, "sm_90a", 4, true, false));
}

class SlicedNvrtc : public test_support::NvrtcTest {};

// How many times `what` occurs in `text` (a PTX listing).
int occurrences(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

// 384 threads at one block per SM (the kernel's __launch_bounds__(384, 1)): no spills on either
// fp8 anchor, at the layer's ring depth and the shallowest, reading the tables or deriving them,
// plain or in pairs.
TEST_F(SlicedNvrtc, CompilesWithoutSpillsOnTheAnchors) {
  test_support::ScratchJit jit("sliced-nvrtc");
  for (int i : {0, 1})
    for (int stages : {2, kSlicedStages})
      for (bool derive : {false, true})
        for (bool pairs : {false, true})
          test_support::expect_compiles_without_spills(
              jit, sliced_spec(anchor(i, "fp8_block"), "sm_90a", stages, derive, pairs), 168);
}

// The L2 prefetch knobs (cuda/nvrtc.hpp): MOETUNE_CP_ASYNC_L2_PREFETCH gives every copy of the
// kernel its qualifier, MOETUNE_SLICED_W2_L2_PREFETCH the w2 copies only, each in an instance of
// its own (another cache key); unset, none; a size PTX does not have is refused naming the
// variable.
TEST_F(SlicedNvrtc, CopiesTakeTheL2PrefetchSizesFromTheEnvironment) {
  const cuda::KernelSpec k = sliced_spec(anchor(0, "fp8_block"), "sm_90a", kSlicedStages, true);
  const char* all = "MOETUNE_CP_ASYNC_L2_PREFETCH";
  const char* w2 = "MOETUNE_SLICED_W2_L2_PREFETCH";
  ::unsetenv(all);
  ::unsetenv(w2);
  const std::string plain = cuda::kernel_ptx(k);
  const std::string plain_key = k.cache_key();
  ::setenv(all, "256", 1);
  const std::string every = cuda::kernel_ptx(k);
  const std::string every_key = k.cache_key();
  ::unsetenv(all);
  ::setenv(w2, "256", 1);
  const std::string w2_only = cuda::kernel_ptx(k);
  const std::string w2_key = k.cache_key();
  ::setenv(w2, "100", 1);
  EXPECT_THROW(cuda::nvrtc_standard_options("sm_90a"), InputError);
  ::unsetenv(w2);
  const std::string cp = "cp.async.cg.shared.global [";
  const std::string cp256 = "cp.async.cg.shared.global.L2::256B [";
  // The producer's copies: w13 and the token rows (loops unrolled), w2's 16 rows a thread.
  const int copies = occurrences(plain, cp);
  EXPECT_GE(copies, 18);
  EXPECT_EQ(occurrences(plain, cp256), 0);
  EXPECT_EQ(occurrences(every, cp), 0);
  EXPECT_EQ(occurrences(every, cp256), copies);
  EXPECT_EQ(occurrences(w2_only, cp256), 16);
  EXPECT_EQ(occurrences(w2_only, cp), copies - 16);
  EXPECT_NE(plain_key, every_key);
  EXPECT_NE(plain_key, w2_key);
  EXPECT_NE(every_key, w2_key);
}

// MOETUNE_SLICED_TRACE=1: an instance of its own whose blocks stamp their progress (five
// globaltimer reads into the unmangled device array the GPU test reads back); unset, none;
// another value refused naming the variable.
TEST_F(SlicedNvrtc, TraceBuildStampsIntoItsOwnArray) {
  const cuda::KernelSpec k = sliced_spec(anchor(0, "fp8_block"), "sm_90a", kSlicedStages, true);
  const char* knob = "MOETUNE_SLICED_TRACE";
  ::unsetenv(knob);
  const std::string plain = cuda::kernel_ptx(k);
  const std::string plain_key = k.cache_key();
  ::setenv(knob, "1", 1);
  const std::string traced = cuda::kernel_ptx(k);
  const std::string traced_key = k.cache_key();
  ::setenv(knob, "2", 1);
  EXPECT_THROW(cuda::nvrtc_standard_options("sm_90a"), InputError);
  ::unsetenv(knob);
  EXPECT_EQ(occurrences(plain, "%globaltimer"), 0);
  EXPECT_EQ(occurrences(plain, sliced_plan::kTraceSymbol), 0);
  EXPECT_GE(occurrences(traced, "%globaltimer"), sliced_plan::kTraceStamps - 1);  // (and %smid)
  EXPECT_EQ(occurrences(plain, "%smid"), 0);
  EXPECT_GE(occurrences(traced, "%smid"), 1);
  EXPECT_NE(traced.find(std::string(".global .align 8 .b8 ") + sliced_plan::kTraceSymbol + "[" +
                        std::to_string(8 * sliced_plan::kTraceBlocks * sliced_plan::kTraceStamps) +
                        "]"),
            std::string::npos);
  EXPECT_NE(plain_key, traced_key);
}

// MOETUNE_SLICED_EARLY_W13 (on unless 0): the producer's first ring units' w13 copies leave
// from the derivation's hook (before the slot list), each unit arriving on its slot there; 0
// compiles an instance of its own without them; the instance that reads the alignment's tables
// derives nothing and is the same either way; another value refused naming the variable.
TEST_F(SlicedNvrtc, EarlyW13CopiesLeaveBeforeTheSlotList) {
  const auto q = anchor(0, "fp8_block");
  const cuda::KernelSpec derive = sliced_spec(q, "sm_90a", kSlicedStages, true);
  const cuda::KernelSpec tables = sliced_spec(q, "sm_90a", kSlicedStages, false);
  const char* knob = "MOETUNE_SLICED_EARLY_W13";
  const std::string cp = "cp.async.cg.shared.global [";
  ::unsetenv(knob);
  const std::string early = cuda::kernel_ptx(derive), early_tables = cuda::kernel_ptx(tables);
  const std::string early_key = derive.cache_key();
  ::setenv(knob, "1", 1);
  const std::string early1 = cuda::kernel_ptx(derive);
  ::setenv(knob, "0", 1);
  const std::string off = cuda::kernel_ptx(derive), off_tables = cuda::kernel_ptx(tables);
  const std::string off_key = derive.cache_key();
  ::setenv(knob, "2", 1);
  EXPECT_THROW(cuda::nvrtc_standard_options("sm_90a"), InputError);
  ::unsetenv(knob);
  // The hook's units: at least one more unit's 16 weight copies (the compiler may unroll the
  // loop) and their own arrivals on the ring's barriers. (1 is the default: the same code,
  // whose PTX differs only in the names NVRTC hashes from the options.)
  const std::string arrive = "cp.async.mbarrier.arrive.noinc";
  EXPECT_EQ(occurrences(early1, cp), occurrences(early, cp));
  EXPECT_EQ(occurrences(early1, arrive), occurrences(early, arrive));
  EXPECT_GE(occurrences(early, cp), occurrences(off, cp) + 16);
  EXPECT_GT(occurrences(early, arrive), occurrences(off, arrive));
  EXPECT_EQ(occurrences(early_tables, cp), occurrences(off_tables, cp));
  EXPECT_EQ(occurrences(early_tables, arrive), occurrences(off_tables, arrive));
  EXPECT_NE(early_key, off_key);
}

}  // namespace
}  // namespace moetune::moe
