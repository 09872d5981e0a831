// FusedMoe's CPU side (no GPU): check(), config lookup with the down->up fallback, the workspace
// layout, and the stage cost model behind profile's floors.
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "gemm/gemm.hpp"
#include "moe/check.hpp"
#include "moe/profile.hpp"
#include "moe/reference.hpp"
#include "moetune/error.hpp"
#include "moetune/fused_moe.hpp"

namespace moetune {
namespace {

MoeShape deepseek(const std::string& dtype) {
  return moe::with_dtype_variant(moe::anchor_check_shapes()[1].shape, dtype);
}

TEST(MoeFused, DefaultTablesAndDownFallsBackToUp) {
  const GpuSpec& h200 = require_gpu("NVIDIA H200");
  FusedMoe a(deepseek("fp8_block"), h200);
  EXPECT_EQ(a.arch(), "sm_90a");
  EXPECT_FALSE(a.up_table().empty());
  KernelConfig c{16, 64, 128, 1, 4, 3, 1};
  FusedMoe b(deepseek("fp8_block"), h200, ConfigTable{{1, c}, {64, KernelConfig{64, 128, 128, 8, 4, 3, 1}}});
  EXPECT_EQ(b.down_config(1), c);  // no down table: the up table
  EXPECT_EQ(b.up_config(20), c);   // nearest key: 1 (|20-1| < |20-64|)
  EXPECT_EQ(b.up_config(50).BLOCK_SIZE_M, 64);
}

// Without tables, the layer uses the default rules' own config at every M up to 256 and at the
// default batch sizes, not a neighbour's: bf16 M = 5 gets its k64 s5 GEMM1 tile, not M = 4's,
// block fp8 M = 41..46 its n256 s2 up tile, not M = 48's s3.
TEST(MoeFused, DefaultTablesFollowTheRulesAtEverySmallM) {
  const GpuSpec& h200 = require_gpu("NVIDIA H200");
  for (const char* d : {"bf16", "fp8_block"}) {
    const MoeShape s = moe::with_dtype_variant(moe::anchor_check_shapes()[0].shape, d);
    FusedMoe fm(s, h200);
    for (int M = 1; M <= 256; ++M) {
      EXPECT_EQ(fm.up_config(M), moetune_default_config(s, h200, M, false)) << d << " M=" << M;
      EXPECT_EQ(fm.down_config(M), moetune_default_config(s, h200, M, true)) << d << " M=" << M;
    }
    for (int M : default_batch_sizes())
      EXPECT_EQ(fm.up_config(M), moetune_default_config(s, h200, M, false)) << d << " M=" << M;
  }
  const MoeShape bf16 = moe::with_dtype_variant(moe::anchor_check_shapes()[0].shape, "bf16");
  EXPECT_EQ(FusedMoe(bf16, h200).up_config(5).BLOCK_SIZE_K, 64);
  EXPECT_EQ(FusedMoe(bf16, h200).up_config(4).BLOCK_SIZE_K, 128);
  EXPECT_EQ(FusedMoe(bf16, h200).up_config(79).num_warps, 4);  // below the w8 band
  EXPECT_EQ(FusedMoe(bf16, h200).up_config(80).num_warps, 8);  // its first M (spe 2.5)
  const MoeShape fp8 = moe::with_dtype_variant(moe::anchor_check_shapes()[0].shape, "fp8_block");
  EXPECT_EQ(FusedMoe(fp8, h200).up_config(46).num_stages, 2);
  EXPECT_EQ(FusedMoe(fp8, h200).up_config(47).num_stages, 3);
}

// Programmatic dependent launch: on by default where the arch has it (sm_90+), off by option,
// never below sm_90.
TEST(MoeFused, PdlOnByDefaultFromSm90) {
  const GpuSpec& h200 = require_gpu("NVIDIA H200");
  const GpuSpec& a100 = require_gpu("NVIDIA A100-SXM4-80GB");
  EXPECT_TRUE(FusedMoeOptions{}.pdl);
  EXPECT_TRUE(FusedMoe(deepseek("bf16"), h200).pdl());
  FusedMoeOptions off;
  off.pdl = false;
  EXPECT_FALSE(FusedMoe(deepseek("bf16"), h200, {}, {}, off).pdl());
  EXPECT_FALSE(FusedMoe(deepseek("bf16"), a100).pdl());
  FusedMoeOptions sm89;
  sm89.arch = "sm_89";
  EXPECT_FALSE(FusedMoe(deepseek("bf16"), h200, {}, {}, sm89).pdl());
}

// The top-k sum folded into GEMM2: on by default from sm_90 (red.global.add of bf16/fp16), off by
// option (--deterministic), never below sm_90, never with the persistent kernel; the layout says
// so per M, the report names gemm2 "gemm2+reduce", and the gemm1, gemm2 and reduce stages refuse
// a null output there (InputError naming out) before touching the GPU.
TEST(MoeFused, TopkSumInGemm2FromSm90) {
  const GpuSpec& h200 = require_gpu("NVIDIA H200");
  const GpuSpec& a100 = require_gpu("NVIDIA A100-SXM4-80GB");
  EXPECT_TRUE(FusedMoeOptions{}.topk_sum_in_gemm2);
  EXPECT_TRUE(gemm2_sums_topk_applies(1, "sm_90a"));
  EXPECT_TRUE(gemm2_sums_topk_applies(1 << 20, "sm_120"));
  EXPECT_FALSE(gemm2_sums_topk_applies(0, "sm_90a"));
  EXPECT_FALSE(gemm2_sums_topk_applies(8, "sm_89"));
  EXPECT_FALSE(gemm2_sums_topk_applies(8, "sm_80"));
  for (const char* d : {"bf16", "fp8_block"}) {
    FusedMoe on(deepseek(d), h200);
    EXPECT_TRUE(on.gemm2_sums_topk(8)) << d;
    EXPECT_TRUE(on.workspace_layout(8).gemm2_sums_topk) << d;
    EXPECT_TRUE(on.workspace_layout(4096).gemm2_sums_topk) << d;
    FusedMoeOptions det;
    det.topk_sum_in_gemm2 = false;
    FusedMoe off(deepseek(d), h200, {}, {}, det);
    EXPECT_FALSE(off.gemm2_sums_topk(8)) << d;
    EXPECT_FALSE(off.workspace_layout(8).gemm2_sums_topk) << d;
  }
  EXPECT_FALSE(FusedMoe(deepseek("bf16"), a100).gemm2_sums_topk(8));
  FusedMoeOptions persistent;
  persistent.persistent_gemms = true;
  FusedMoe p(deepseek("fp8_block"), h200, {}, {}, persistent);
  ASSERT_TRUE(p.uses_persistent_gemms(8));
  EXPECT_FALSE(p.gemm2_sums_topk(8));  // the persistent kernel keeps the separate sum
  const KernelConfig c{16, 64, 128, 1, 4, 3, 1};
  const MoeShape bf = deepseek("bf16");
  EXPECT_STREQ(stage_name(MoeStage::gemm2, bf, 8, c, true), "gemm2+reduce");
  EXPECT_STREQ(stage_name(MoeStage::reduce, bf, 8, c, true), "reduce (in gemm2)");
  EXPECT_STREQ(stage_name(MoeStage::gemm2, bf, 8, c), "gemm2");
  EXPECT_STREQ(stage_name(MoeStage::reduce, bf, 8, c), "reduce");
  EXPECT_STREQ(stage_name(MoeStage::align, bf, 8, c, true, true), "align (in gemm1)");
  EXPECT_STREQ(stage_name(MoeStage::align, bf, 8, c, true), "align");
  // A null out where GEMM2 adds into it: refused before any launch (no GPU here).
  FusedMoe on(bf, h200);
  const MoeWorkspaceLayout L = on.workspace_layout(8);
  std::vector<char> fake(L.total + 256);
  MoeInputs in;
  in.M = 8;
  in.hidden = fake.data();
  in.topk_ids = reinterpret_cast<const std::int32_t*>(fake.data());
  in.topk_weights = reinterpret_cast<const float*>(fake.data());
  for (MoeStage st : {MoeStage::gemm1, MoeStage::gemm2, MoeStage::reduce}) {
    try {
      on.enqueue_stage(st, in, MoeWeights{}, nullptr, fake.data(), fake.size(), nullptr);
      ADD_FAILURE() << to_string(st) << ": accepted a null out";
    } catch (const InputError& e) {
      EXPECT_EQ(e.field(), "out") << to_string(st);
    }
  }
}

// The stage GEMM1 deriving the alignment (the sliced kernel off: it derives its own): off by
// default on the H200 (M = 12 here; M = 6..8 run the sliced kernel by default); when asked, for
// block fp8 at M = 7..32 on both anchors (swap-AB wgmma tiles without split-K; M = 6's GEMM1
// is split-K 2), never where routing and alignment share a launch (M <= 5) or past 256 slots
// (M = 33 at topk 8), never for bf16 (its decode GEMM1 is the mma.sync kernel's), on another
// arch's kernels, with the persistent kernel or with a split-K GEMM2; the layout says so per M.
TEST(MoeFused, AlignmentInGemm1WhereItApplies) {
  const GpuSpec& h200 = require_gpu("NVIDIA H200");
  EXPECT_FALSE(FusedMoeOptions{}.alignment_in_gemm1.has_value());  // the GPU's default
  FusedMoeOptions on;
  on.alignment_in_gemm1 = true;
  on.sliced_gemms = false;
  for (int shape : {0, 1})
    for (const char* d : {"bf16", "fp8_block"}) {
      const MoeShape s = moe::with_dtype_variant(moe::anchor_check_shapes()[shape].shape, d);
      const std::string what = std::string(d) + " shape " + std::to_string(shape);
      EXPECT_FALSE(FusedMoe(s, h200).gemm1_aligns(12)) << what;
      const FusedMoe fm(s, h200, {}, {}, on);
      for (std::int64_t M = 1; M <= 40; ++M) {
        const bool want = std::string(d) == "fp8_block" && M >= 7 && M <= 32;
        EXPECT_EQ(fm.gemm1_aligns(M), want) << what << " M=" << M;
        EXPECT_EQ(fm.workspace_layout(M).gemm1_aligns, want) << what << " M=" << M;
      }
      FusedMoeOptions sm89 = on;
      sm89.arch = "sm_89";
      EXPECT_FALSE(FusedMoe(s, h200, {}, {}, sm89).gemm1_aligns(8)) << what;
    }
  const MoeShape f8 = deepseek("fp8_block");
  MoeShape ep = f8;  // EP 2, rank 1 (tests/gpu/test_moe_align_in_gemm1.cpp runs it)
  ep.E = ep.E_global / 2;
  FusedMoeOptions rank1 = on;
  rank1.rank = 1;
  const FusedMoe ep_moe(ep, h200, {}, {}, rank1);
  for (std::int64_t M : {16, 32}) EXPECT_TRUE(ep_moe.gemm1_aligns(M)) << "EP rank 1 M=" << M;
  EXPECT_EQ(ep_moe.up_config(8).SPLIT_K, 2);  // 128 local experts: GEMM1 splits K at M = 8
  EXPECT_FALSE(ep_moe.gemm1_aligns(8));
  FusedMoeOptions persistent = on;
  persistent.persistent_gemms = true;
  const FusedMoe p(f8, h200, {}, {}, persistent);
  ASSERT_TRUE(p.uses_persistent_gemms(8));
  EXPECT_FALSE(p.gemm1_aligns(8));
  const KernelConfig up{16, 256, 128, 1, 4, 3, 1, 1}, split_down{16, 64, 128, 1, 4, 3, 2};
  const FusedMoe sk(f8, h200, ConfigTable{{8, up}}, ConfigTable{{8, split_down}}, on);
  EXPECT_TRUE(FusedMoe(f8, h200, ConfigTable{{8, up}}, {}, on).gemm1_aligns(8));
  EXPECT_FALSE(sk.gemm1_aligns(8));  // the alignment launch zeroes GEMM2's split-K counters
}

// The default (alignment_in_gemm1 unset): on the H100 SXM, block fp8 derives the alignment where
// its GEMM1 is the fused n256 tile (M = 7..11 and 16..32 on both anchors: M = 12..15 keep the
// n128 tile and the activation stage, moetune_default_config's band there) or the sliced kernel
// runs (its default at M = 6..8 and 14..24); on the H200 only where the sliced kernel (M = 6..8
// and 14..20) derives it, never for bf16; `false` turns it off on
// the H100 too, and a table's unfused tile keeps the align launch where `true` would not.
TEST(MoeFused, AlignmentInGemm1DefaultsToTheH100sFusedTile) {
  const GpuSpec& h100 = require_gpu("NVIDIA H100 80GB HBM3");
  const GpuSpec& h200 = require_gpu("NVIDIA H200");
  FusedMoeOptions off;
  off.alignment_in_gemm1 = false;
  for (int shape : {0, 1})
    for (const char* d : {"bf16", "fp8_block"}) {
      const MoeShape s = moe::with_dtype_variant(moe::anchor_check_shapes()[shape].shape, d);
      const std::string what = std::string(d) + " shape " + std::to_string(shape);
      const FusedMoe dflt(s, h100), never(s, h100, {}, {}, off);
      for (std::int64_t M = 1; M <= 40; ++M) {
        // M = 6..8 and 14..24: the sliced kernel (the H100's default there) derives it; M = 12
        // and 13 take the unfused stage tile, which does not.
        const bool want =
            std::string(d) == "fp8_block" && ((M >= 6 && M <= 11) || (M >= 14 && M <= 32));
        EXPECT_EQ(dflt.gemm1_aligns(M), want) << what << " M=" << M;
        if (std::string(d) == "fp8_block" && M >= 7 && M <= 32 && !dflt.uses_sliced_gemms(M)) {
          // the stage GEMM1 derives it where its tile fuses the activation
          EXPECT_EQ(dflt.workspace_layout(M).gemm1_fused_act, want) << what << " M=" << M;
        }
        EXPECT_FALSE(never.gemm1_aligns(M)) << what << " M=" << M;
        // The H200: only where the sliced kernel (its default at M = 6..8 and 14..20) derives it.
        const bool sliced =
            std::string(d) == "fp8_block" && ((M >= 6 && M <= 8) || (M >= 14 && M <= 20));
        EXPECT_EQ(FusedMoe(s, h200).gemm1_aligns(M), sliced) << what << " M=" << M;
      }
    }
  const MoeShape f8 = deepseek("fp8_block");
  const KernelConfig unfused{16, 128, 128, 1, 4, 3, 1, 1};
  FusedMoeOptions stages, on;  // the stage GEMM1 (no sliced kernel): the rule is the tile's
  stages.sliced_gemms = on.sliced_gemms = false;
  on.alignment_in_gemm1 = true;
  EXPECT_FALSE(FusedMoe(f8, h100, ConfigTable{{8, unfused}}, {}, stages).gemm1_aligns(8));
  EXPECT_TRUE(FusedMoe(f8, h100, ConfigTable{{8, unfused}}, {}, on).gemm1_aligns(8));
}

// The deriving GEMM1 instance: the wgmma kernel with ALIGN_E = E and a name of its own; refused
// (InputError naming inline_align) for a down stage, a split-K tile, or the mma.sync kernel.
TEST(MoeFused, AlignmentInGemm1KernelSpec) {
  const MoeShape s = deepseek("fp8_block");
  const KernelConfig up{16, 256, 128, 1, 4, 3, 1, 1};  // swap-AB
  const cuda::KernelSpec plain = gemm::gemm_kernel_spec(s, up, gemm::GemmStage::up_act, "sm_90a");
  const cuda::KernelSpec ia =
      gemm::gemm_kernel_spec(s, up, gemm::GemmStage::up_act, "sm_90a", true);
  auto arg = [](const cuda::KernelSpec& k, const std::string& name) {
    for (const auto& [n, v] : k.template_args)
      if (n == name) return v;
    return std::string("missing");
  };
  EXPECT_EQ(arg(plain, "ALIGN_E"), "0");
  EXPECT_EQ(arg(ia, "ALIGN_E"), std::to_string(s.E));
  EXPECT_NE(plain.name, ia.name);
  EXPECT_EQ(ia.name, plain.name + "_ia" + std::to_string(s.E));
  EXPECT_EQ(gemm::gemm_inline_align_violation(s, up, gemm::GemmStage::up_act, 32, "sm_90a"),
            nullptr);
  EXPECT_NE(gemm::gemm_inline_align_violation(s, up, gemm::GemmStage::up_act, 33, "sm_90a"),
            nullptr);  // 264 slots
  auto refused = [&](const KernelConfig& c, gemm::GemmStage st, const char* arch) {
    try {
      gemm::gemm_kernel_spec(s, c, st, arch, true);
    } catch (const InputError& e) {
      return e.field() == "inline_align";
    }
    return false;
  };
  EXPECT_TRUE(refused(up, gemm::GemmStage::down, "sm_90a"));
  EXPECT_TRUE(refused(KernelConfig{16, 256, 128, 1, 4, 3, 2, 1}, gemm::GemmStage::up_act, "sm_90a"));
  EXPECT_TRUE(refused(KernelConfig{16, 64, 128, 1, 4, 3, 1}, gemm::GemmStage::up, "sm_89"));
}

// The default tables follow the arch the kernels are compiled for: an H200 told to build sm_89
// or plain sm_90 kernels gets no wgmma-only tile (swap-AB), for bf16 and block fp8 alike; its
// own arch (sm_90a) does.
TEST(MoeFused, DefaultTablesFollowAnArchOverride) {
  const GpuSpec& h200 = require_gpu("NVIDIA H200");
  for (const char* dtype : {"bf16", "fp8_block"}) {
    const FusedMoe own(deepseek(dtype), h200);
    EXPECT_EQ(own.down_config(64).SWAP_AB, 1) << dtype;
    for (const char* arch : {"sm_89", "sm_90"}) {
      FusedMoeOptions o;
      o.arch = arch;
      const FusedMoe other(deepseek(dtype), h200, {}, {}, o);
      EXPECT_EQ(other.arch(), arch);
      for (const auto& [M, c] : other.up_table()) EXPECT_EQ(c.SWAP_AB, 0) << dtype << arch << M;
      for (const auto& [M, c] : other.down_table()) EXPECT_EQ(c.SWAP_AB, 0) << dtype << arch << M;
    }
  }
}

TEST(MoeFused, CheckRefusesWithTheFieldAtFault) {
  const GpuSpec& h200 = require_gpu("NVIDIA H200");
  const GpuSpec& a100 = require_gpu("NVIDIA A100-SXM4-80GB");
  try {
    FusedMoe::check(deepseek("fp8_block"), a100, ConfigTable{{1, KernelConfig{16, 64, 128, 1, 4, 3, 1}}}, {});
    FAIL() << "fp8 on sm_80 accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "dtype");
  }
  // One alignment serves both GEMMs: BLOCK_SIZE_M must match.
  try {
    FusedMoe::check(deepseek("bf16"), h200, ConfigTable{{1, KernelConfig{16, 64, 64, 1, 4, 3, 1}}},
                    ConfigTable{{1, KernelConfig{32, 64, 64, 1, 4, 3, 1}}});
    FAIL() << "BLOCK_SIZE_M mismatch accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "BLOCK_SIZE_M");
  }
  // BLOCK_SIZE_K 256 straddles two 128-wide fp8 scale groups.
  EXPECT_THROW(FusedMoe::check(deepseek("fp8_block"), h200,
                               ConfigTable{{1, KernelConfig{16, 64, 256, 1, 4, 3, 1}}}, {}),
               InputError);
  // EP rank past E_global / E.
  FusedMoeOptions o;
  o.rank = 1;
  EXPECT_THROW(FusedMoe::check(deepseek("bf16"), h200,
                               ConfigTable{{1, KernelConfig{16, 64, 64, 1, 4, 3, 1}}}, {}, o),
               InputError);
}

TEST(MoeFused, WorkspaceLayoutIsDisjointAligned) {
  const GpuSpec& h200 = require_gpu("NVIDIA H200");
  ConfigTable up{{1, KernelConfig{16, 64, 128, 1, 4, 3, 2}}, {4096, KernelConfig{128, 128, 128, 8, 8, 3, 1}}};
  FusedMoe f(deepseek("fp8_block"), h200, up);
  const MoeShape& s = f.shape();
  for (std::int64_t M : {1, 3, 257, 4096, 40000}) {
    const MoeWorkspaceLayout L = f.workspace_layout(M);
    const std::size_t slots = std::size_t(M) * s.topk;
    struct R {
      std::size_t off, bytes;
    };
    const std::vector<R> regions = {
        {L.topk_ids, slots * 4},
        {L.topk_weights, slots * 4},
        {L.sorted_token_ids, std::size_t(L.max_num_tokens_padded) * 4},
        {L.expert_ids, std::size_t(L.max_num_m_blocks) * 4},
        {L.num_tokens_post_padded, 4},
        {L.a_q, std::size_t(M) * s.K},
        {L.a_scale, std::size_t(M) * (s.K / 128) * 4},
        {L.h, slots * 2 * s.N * 2},
        {L.act, 0},  // block fp8: SiLU·up is quantized in the kernel that computes it
        {L.act_q, slots * s.N},
        {L.act_scale, slots * (s.N / 128) * 4},
        {L.y, slots * s.K * 2},
        {L.gemm_up, L.gemm_up_bytes},
        {L.gemm_down, L.gemm_down_bytes}};
    for (std::size_t i = 0; i < regions.size(); ++i) {
      EXPECT_EQ(regions[i].off % 256, 0u) << i;
      EXPECT_LE(regions[i].off + regions[i].bytes, L.total) << i;
      if (i + 1 < regions.size()) {
        EXPECT_LE(regions[i].off + regions[i].bytes, regions[i + 1].off) << i;
      }
    }
    EXPECT_EQ(L.max_num_tokens_padded,
              moe::max_num_tokens_padded(M, s.topk, s.E, f.up_config(M).BLOCK_SIZE_M));
    EXPECT_EQ(f.workspace_bytes(M), L.total);
  }
  EXPECT_LE(f.workspace_bytes(3), f.workspace_bytes(4096));  // a max_M workspace serves smaller M
  // 40000 tokens of DeepSeek: GEMM2's output alone is M*topk*K*2 bytes > 2^32.
  EXPECT_GT(f.workspace_bytes(40000), std::size_t(40000) * 8 * 7168 * 2);
}

// bf16/fp16 at decode sizes (M <= 256 here: 8 slots per expert): GEMM1 writes SiLU(gate)·up into
// `act` itself, so the [M*topk, 2N] intermediate has no room in the workspace (it never reaches
// memory); above that it keeps its room. Block fp8 fuses where the up config can (the default
// swap-AB n256 tile at M = 64 here, not the n128 one at M = 16): with such a mixed table h keeps
// its room at every M (which M fuse need not be monotone). A max_M workspace serves every M.
TEST(MoeFused, Bf16WorkspaceHasNoGemm1Intermediate) {
  const GpuSpec& h200 = require_gpu("NVIDIA H200");
  for (const char* d : {"bf16", "fp16"}) {
    FusedMoe f(deepseek(d), h200);
    for (std::int64_t M : {1, 256, 257, 4096}) {
      const bool fused = M <= 256;
      EXPECT_EQ(gemm1_fuses_act(f.shape(), M, f.up_config(M)), fused) << d << " M=" << M;
      const MoeWorkspaceLayout L = f.workspace_layout(M);
      EXPECT_EQ(L.gemm1_fused_act, fused);
      const std::size_t slots = std::size_t(M) * f.shape().topk;
      if (fused) {
        EXPECT_EQ(L.h, L.act) << d << " M=" << M;  // zero bytes
      } else {
        EXPECT_GE(L.act - L.h, slots * 2 * f.shape().N * 2) << d << " M=" << M;
      }
      EXPECT_GE(L.y - L.act, slots * f.shape().N * 2);  // act still holds [M*topk, N]
      EXPECT_LE(L.total, f.workspace_bytes(4096)) << d << " M=" << M;
    }
  }
  FusedMoe f8(deepseek("fp8_block"), h200);
  EXPECT_EQ(f8.up_config(64).BLOCK_SIZE_N, 256);
  EXPECT_EQ(f8.up_config(16).BLOCK_SIZE_N, 128);
  EXPECT_TRUE(gemm1_fuses_act(f8.shape(), 64, f8.up_config(64)));
  EXPECT_FALSE(gemm1_fuses_act(f8.shape(), 16, f8.up_config(16)));
  EXPECT_FALSE(f8.workspace_layout(16).gemm1_fused_act);
  const MoeWorkspaceLayout L8 = f8.workspace_layout(64);
  EXPECT_TRUE(L8.gemm1_fused_act);
  EXPECT_GE(L8.act - L8.h, std::size_t(64) * 8 * 2 * f8.shape().N * 2);
  EXPECT_LE(L8.total, f8.workspace_bytes(4096));
  // Block fp8: the activation stage writes act_q from h in one kernel; `act` has no room.
  EXPECT_TRUE(L8.act_quant_fused);
  EXPECT_EQ(L8.act_q, L8.act);
  MoeShape tensor = deepseek("fp8_block");
  tensor.block_shape.reset();  // per-tensor fp8 needs the 16-bit activation for its amax
  const MoeWorkspaceLayout Lt = FusedMoe(tensor, h200).workspace_layout(64);
  EXPECT_FALSE(Lt.act_quant_fused);
  EXPECT_GE(Lt.act_q - Lt.act, std::size_t(64) * 8 * f8.shape().N * 2);
}

// A block-fp8 table whose up configs all fuse (swap-AB n256): h has no room where GEMM1 fuses
// (up to 8 slots per expert) and its room from there on, as for bf16; one that cannot fuse keeps
// h's room; a table mixing them keeps it at every M.
TEST(MoeFused, BlockFp8FusedTableWorkspace) {
  const GpuSpec& h200 = require_gpu("NVIDIA H200");
  const KernelConfig n256{16, 256, 128, 1, 4, 3, 1, 1}, n128{16, 128, 128, 1, 4, 3, 1, 1},
      down{16, 128, 128, 1, 4, 2, 1, 1};
  const MoeShape s = deepseek("fp8_block");
  FusedMoe fused(s, h200, ConfigTable{{8, n256}, {4096, n256}}, ConfigTable{{8, down}, {4096, down}});
  const MoeWorkspaceLayout L8 = fused.workspace_layout(8);
  EXPECT_TRUE(L8.gemm1_fused_act);
  EXPECT_EQ(L8.h, L8.act);  // zero bytes
  const MoeWorkspaceLayout L4096 = fused.workspace_layout(4096);
  EXPECT_FALSE(L4096.gemm1_fused_act);
  EXPECT_GE(L4096.act - L4096.h, std::size_t(4096) * 8 * 2 * s.N * 2);
  FusedMoe mixed(s, h200, ConfigTable{{8, n256}, {16, n128}}, ConfigTable{{8, down}, {16, down}});
  EXPECT_TRUE(mixed.workspace_layout(8).gemm1_fused_act);
  EXPECT_FALSE(mixed.workspace_layout(16).gemm1_fused_act);
  for (std::int64_t M : {8, 16}) {
    const MoeWorkspaceLayout L = mixed.workspace_layout(M);
    EXPECT_GE(L.act - L.h, std::size_t(M) * 8 * 2 * s.N * 2) << M;
    EXPECT_LE(L.total, mixed.workspace_bytes(16)) << M;
  }
}

// Block fp8's activation stage: read h, write the fp8 activation and its scales (no 16-bit
// round trip); per-tensor fp8 writes SiLU·up, reads it back and writes the fp8 copy.
TEST(MoeFused, Fp8ActivationStageBytes) {
  const MoeShape f8 = deepseek("fp8_block");
  MoeShape tensor = f8;
  tensor.block_shape.reset();
  const std::int64_t M = 64;
  const double slots = double(M) * f8.topk * double(f8.E) / f8.E_global, N = f8.N;
  EXPECT_DOUBLE_EQ(moe::stage_cost(f8, MoeStage::act, M, true, false).bytes,
                   slots * 2 * N * 2 + slots * N + slots * (N / 128) * 4);
  EXPECT_DOUBLE_EQ(moe::stage_cost(tensor, MoeStage::act, M, true, false).bytes,
                   slots * 2 * N * 2 + slots * N * 2 + slots * N * 2 + slots * N);
}

// Decode sizes with router logits: one launch routes and aligns; its bytes are counted once.
TEST(MoeFused, RoutingAlignsAtDecodeSizes) {
  const MoeShape f8 = deepseek("fp8_block");
  EXPECT_TRUE(routing_fuses_align(f8, 1, true));
  EXPECT_TRUE(routing_fuses_align(f8, 5, true));
  EXPECT_FALSE(routing_fuses_align(f8, 6, true));  // M = 6..8 measured slower, M = 32 far slower
  EXPECT_FALSE(routing_fuses_align(f8, 4, false));  // precomputed topk_ids: align alone
  const MoeShape bf = deepseek("bf16");
  const KernelConfig c{16, 64, 128, 1, 4, 3, 1};
  EXPECT_STREQ(stage_name(MoeStage::routing, bf, 4, c), "routing+align");
  EXPECT_STREQ(stage_name(MoeStage::align, bf, 4, c), "align (in routing)");
  EXPECT_STREQ(stage_name(MoeStage::routing, bf, 5, c), "routing+align");
  EXPECT_STREQ(stage_name(MoeStage::routing, bf, 6, c), "routing");
  EXPECT_STREQ(stage_name(MoeStage::routing, bf, 64, c), "routing");
  EXPECT_STREQ(stage_name(MoeStage::align, bf, 64, c), "align");
  EXPECT_EQ(moe::stage_cost(f8, MoeStage::align, 4, true, false).bytes, 0);
  EXPECT_GT(moe::stage_cost(f8, MoeStage::align, 4, false, false).bytes, 0);
  const double slots = 4.0 * f8.topk, local = slots * double(f8.E) / f8.E_global;
  EXPECT_DOUBLE_EQ(moe::stage_cost(bf, MoeStage::routing, 4, true, true).bytes,
                   4.0 * f8.E_global * 4 + slots * 8 + local * 4);
}

// Block fp8 with router logits: the routing launch's spare blocks quantize the hidden states
// (independent of the routing), so the quant stage launches nothing and its bytes move to the
// routing; precomputed topk_ids (no routing launch) and per-tensor fp8 (global amax first) keep
// the quant stage.
TEST(MoeFused, RoutingQuantizesBlockFp8) {
  const MoeShape f8 = deepseek("fp8_block"), bf = deepseek("bf16");
  MoeShape tensor = f8;
  tensor.block_shape.reset();
  EXPECT_TRUE(routing_fuses_quant(f8, true));
  EXPECT_FALSE(routing_fuses_quant(f8, false));
  EXPECT_FALSE(routing_fuses_quant(tensor, true));
  EXPECT_FALSE(routing_fuses_quant(bf, true));
  const KernelConfig c{16, 64, 128, 1, 4, 3, 1};
  EXPECT_STREQ(stage_name(MoeStage::routing, f8, 4, c), "routing+align+quant");
  EXPECT_STREQ(stage_name(MoeStage::routing, f8, 64, c), "routing+quant");
  EXPECT_STREQ(stage_name(MoeStage::quant, f8, 64, c), "quant (in routing)");
  EXPECT_STREQ(stage_name(MoeStage::quant, tensor, 64, c), "quant");
  const std::int64_t M = 64;
  const double m = double(M), K = f8.K;
  const double quant_bytes = m * K * 2 + m * K + m * (K / 128) * 4;
  EXPECT_EQ(moe::stage_cost(f8, MoeStage::quant, M, true, false).bytes, 0);
  EXPECT_DOUBLE_EQ(moe::stage_cost(f8, MoeStage::quant, M, false, false).bytes, quant_bytes);
  EXPECT_DOUBLE_EQ(moe::stage_cost(f8, MoeStage::routing, M, true, false).bytes,
                   moe::stage_cost(bf, MoeStage::routing, M, true, true).bytes + quant_bytes);
}

TEST(MoeFused, StageNamesAndCostsSayTheActivationIsInGemm1) {
  const MoeShape bf = deepseek("bf16"), f8 = deepseek("fp8_block");
  const KernelConfig c{16, 64, 128, 1, 4, 3, 1}, swap128{16, 128, 128, 1, 4, 3, 1, 1},
      swap256{16, 256, 128, 1, 4, 3, 1, 1};
  EXPECT_STREQ(stage_name(MoeStage::gemm1, bf, 64, c), "gemm1+act");
  EXPECT_STREQ(stage_name(MoeStage::act, bf, 64, c), "act (in gemm1)");
  EXPECT_STREQ(stage_name(MoeStage::gemm1, bf, 4096, c), "gemm1");
  EXPECT_STREQ(stage_name(MoeStage::act, bf, 4096, c), "act");
  EXPECT_STREQ(stage_name(MoeStage::gemm1, f8, 64, swap128), "gemm1");
  EXPECT_STREQ(stage_name(MoeStage::act, f8, 64, swap128), "act");
  EXPECT_STREQ(stage_name(MoeStage::gemm1, f8, 64, swap256), "gemm1+act");
  EXPECT_STREQ(stage_name(MoeStage::act, f8, 64, swap256), "act (in gemm1)");
  EXPECT_STREQ(stage_name(MoeStage::gemm2, bf, 64, c), "gemm2");
  const std::int64_t M = 64;
  EXPECT_EQ(moe::stage_cost(bf, MoeStage::act, M, true, true).bytes, 0);
  EXPECT_EQ(moe::stage_cost(f8, MoeStage::act, M, true, true).bytes, 0);
  EXPECT_GT(moe::stage_cost(f8, MoeStage::act, M, true, false).bytes, 0);
  // gemm1 writes [slots, N] instead of [slots, 2N] (block fp8: e4m3 and a scale per 128
  // columns); the FLOPs stay those of the 2N columns.
  const double slots = double(M) * bf.topk * double(bf.E) / bf.E_global;
  const auto g1 = moe::stage_cost(bf, MoeStage::gemm1, M, true, true);
  EXPECT_DOUBLE_EQ(g1.flops, 2.0 * slots * 2 * bf.N * bf.K);
  EXPECT_DOUBLE_EQ(moe::stage_cost(bf, MoeStage::gemm1, M, true, false).bytes - g1.bytes,
                   slots * bf.N * 2);
  EXPECT_DOUBLE_EQ(moe::stage_cost(f8, MoeStage::gemm1, M, true, false).bytes -
                       moe::stage_cost(f8, MoeStage::gemm1, M, true, true).bytes,
                   slots * 2 * f8.N * 2 - slots * f8.N - slots * (f8.N / 128) * 4);
}

TEST(MoeFused, StageCostsAddUpToTheRooflineFlops) {
  const MoeShape s = deepseek("fp8_block");
  const std::int64_t M = 64;
  const auto g1 = moe::stage_cost(s, MoeStage::gemm1, M, true, false);
  const auto g2 = moe::stage_cost(s, MoeStage::gemm2, M, true, false);
  EXPECT_DOUBLE_EQ(g1.flops + g2.flops, 6.0 * M * s.topk * s.N * s.K);  // DESIGN's roofline flops
  EXPECT_EQ(moe::stage_cost(moe::with_dtype_variant(s, "bf16"), MoeStage::quant, M, true, true)
                .bytes,
            0);
  EXPECT_EQ(moe::stage_cost(s, MoeStage::routing, M, false, false).bytes, 0);  // precomputed top-k
  EXPECT_GT(moe::stage_cost(s, MoeStage::align, M, true, false).bytes, 0);
}

}  // namespace
}  // namespace moetune
