// The decode kernels' host side (no GPU): which shapes they take, their geometry per M, the
// workspace they need, and what their kernel specs carry.
#include <algorithm>
#include <string>

#include <gtest/gtest.h>

#include "moe/check.hpp"
#include "moe/decode.hpp"
#include "moe/stages.hpp"
#include "moetune/error.hpp"
#include "moetune/fused_moe.hpp"
#include "nvrtc_test.hpp"
#include "router_widths.hpp"

namespace moetune::moe {
namespace {

MoeShape anchor(int i, const char* dtype) {
  return with_dtype_variant(anchor_check_shapes()[i].shape, dtype);
}

std::string arg(const cuda::KernelSpec& k, const std::string& name) {
  for (const auto& [n, v] : k.template_args)
    if (n == name) return v;
  return "";
}

TEST(MoeDecode, TakesTheAnchorsAndRefusesWhatItCannotRun) {
  for (int i : {0, 1})
    for (const char* d : {"bf16", "fp16", "fp8_block"})
      EXPECT_EQ(decode_kernels_unfit(anchor(i, d)), "") << i << " " << d;
  EXPECT_NE(decode_kernels_unfit(anchor(0, "fp8_tensor")).find("per-tensor"), std::string::npos);
  MoeShape s = anchor(0, "fp8_block");
  s.N = 8192;  // a token's act row no longer fits a warp's registers
  EXPECT_NE(decode_kernels_unfit(s), "");
  s = anchor(0, "bf16");
  s.topk = 33;
  EXPECT_NE(decode_kernels_unfit(s).find("topk"), std::string::npos);
  s = anchor(0, "bf16");
  s.K = 3000;  // 6000 row bytes: not 64-byte chunks
  EXPECT_NE(decode_kernels_unfit(s), "");
  s = anchor(0, "bf16");
  s.K = 32768;  // the hidden state (64 KiB as bf16) exceeds 48 KiB of shared memory
  EXPECT_NE(decode_kernels_unfit(s).find("shared memory"), std::string::npos);
  s = anchor(0, "fp8_block");
  s.block_shape = std::array<int, 2>{128, 64};  // block_k 64: a scale per chunk, not supported
  EXPECT_NE(decode_kernels_unfit(s).find("block_k"), std::string::npos);
  EXPECT_THROW(decode_geometry(anchor(0, "fp8_tensor"), 1), InputError);
  // The layer's predicate adds M.
  const MoeShape q = anchor(0, "fp8_block");
  EXPECT_FALSE(decode_kernels_apply(q, 0));
  for (std::int64_t M = 1; M <= kDecodeMaxTokens; ++M) EXPECT_TRUE(decode_kernels_apply(q, M));
  EXPECT_FALSE(decode_kernels_apply(q, kDecodeMaxTokens + 1));
  EXPECT_FALSE(decode_kernels_apply(anchor(0, "fp8_tensor"), 1));
}

// By the w13 row length: up to 4 tokens to 6144 bytes (Qwen3.5 TP4: fp8 3072, bf16 6144), 2 to
// 8192 (DeepSeek-V3 TP8 fp8: 7168), none beyond (DeepSeek-V3 bf16: 14336); none where they do
// not fit.
TEST(MoeDecode, MaxTokensFollowTheRowLength) {
  EXPECT_EQ(decode_max_tokens(anchor(0, "fp8_block")), 4);
  EXPECT_EQ(decode_max_tokens(anchor(0, "bf16")), 4);
  const MoeShape ds = anchor(1, "fp8_block");
  EXPECT_EQ(decode_max_tokens(ds), 2);
  EXPECT_TRUE(decode_kernels_apply(ds, 2));
  EXPECT_FALSE(decode_kernels_apply(ds, 3));
  EXPECT_EQ(decode_max_tokens(anchor(1, "bf16")), 0);
  EXPECT_FALSE(decode_kernels_apply(anchor(1, "bf16"), 1));
  EXPECT_EQ(decode_max_tokens(anchor(0, "fp8_tensor")), 0);
  MoeShape s = anchor(0, "bf16");
  s.K = 4096;  // 8192-byte rows: 2 tokens; one more 64-byte chunk per warp slice: none
  EXPECT_EQ(decode_max_tokens(s), 2);
  s.K = 4096 + 128;
  EXPECT_EQ(decode_max_tokens(s), 0);
}

TEST(MoeDecode, GeometryPerM) {
  // DeepSeek-V3 fp8 TP8: K = 7168 e4m3 bytes; 16 warps at M = 1 (896 bytes = 14 chunks each),
  // 8 above with 4-chunk batches (28 chunks per warp).
  const MoeShape ds = anchor(1, "fp8_block");
  DecodeGeometry g = decode_geometry(ds, 1);
  EXPECT_EQ(g.wpt, 8);
  EXPECT_EQ(g.threads_up, 512);
  EXPECT_EQ(g.batch, 8);
  EXPECT_EQ(g.threads_down, 32 * ds.topk);
  g = decode_geometry(ds, 2);
  EXPECT_EQ(g.wpt, 4);
  EXPECT_EQ(g.threads_up, 256);
  EXPECT_EQ(g.batch, 4);
  // Qwen3.5 fp8 TP4: K = 3072: 8 warps at every M (16 would leave 6 chunks each), batches of 6.
  const MoeShape qf = anchor(0, "fp8_block");
  for (std::int64_t M : {1, 4}) {
    g = decode_geometry(qf, M);
    EXPECT_EQ(g.wpt, 4) << M;
    EXPECT_EQ(g.batch, 6) << M;
  }
  // bf16: 6144 row bytes = 24 chunks per warp at 8 warps (12 at 16: not taken), batches of 8.
  g = decode_geometry(anchor(0, "bf16"), 1);
  EXPECT_EQ(g.wpt, 4);
  EXPECT_EQ(g.batch, 8);
  EXPECT_EQ(g.cols, 16);
  EXPECT_EQ(g.pieces, 0);  // no compute capability given: the register batches
}

TEST(MoeDecode, BulkCopiesAtOneTokenOnSm90WhereTheRowsFit) {
  // Qwen3.5 fp8 TP4 at M = 1 on sm_90: 8 warps x 16 rows x (768 + 64 padding) bytes.
  const MoeShape qf = anchor(0, "fp8_block");
  DecodeGeometry g = decode_geometry(qf, 1, 90);
  EXPECT_EQ(g.pieces, 2);  // 12 chunks per warp: two pieces of 6
  EXPECT_EQ(g.smem_up, 8 * 16 * 832);
  for (auto [M, cc] : {std::pair{2, 90}, {1, 89}, {1, 0}}) {
    g = decode_geometry(qf, M, cc);
    EXPECT_EQ(g.pieces, 0) << M << " " << cc;
    EXPECT_EQ(g.smem_up, 0) << M << " " << cc;
  }
  // bf16: 1536-byte slices, 8 x 16 x 1600 = 200 KB, within the 227 KB of a block.
  g = decode_geometry(anchor(0, "bf16"), 1, 90);
  EXPECT_EQ(g.pieces, 2);
  EXPECT_EQ(g.smem_up, 8 * 16 * 1600);
  // sm_100 (227 KB a block) as sm_90; sm_120 (99 KB a block: the RTX 50 / RTX PRO Blackwell
  // GPUs) fits neither Qwen3.5 share (106 KB fp8 + the static part, 200 KB bf16); an unlisted
  // capability (11.0) takes none.
  EXPECT_EQ(decode_geometry(qf, 1, 100).pieces, 2);
  for (int cc : {120, 121, 110}) {
    EXPECT_EQ(decode_geometry(qf, 1, cc).pieces, 0) << cc;
    EXPECT_EQ(decode_geometry(anchor(0, "bf16"), 1, cc).pieces, 0) << cc;
  }
  // The GPU, where known: Qwen3.5 TP4's 128 blocks fit one wave on an H200 (132 SMs; fp8 two
  // blocks of ~110 KB per SM, bf16 one of ~206 KB), bf16 not on an H100 PCIe (114 SMs), where
  // the register path keeps several blocks per SM; nor where the device allows less per block.
  const DecodeGpu h200{132, 227 * 1024}, h100_pcie{114, 227 * 1024}, small{132, 99 * 1024};
  EXPECT_EQ(decode_geometry(qf, 1, 90, h200).pieces, 2);
  EXPECT_EQ(decode_geometry(anchor(0, "bf16"), 1, 90, h200).pieces, 2);
  EXPECT_EQ(decode_geometry(qf, 1, 90, h100_pcie).pieces, 2);  // 228 KB / 111 KB: 2 per SM
  EXPECT_EQ(decode_geometry(anchor(0, "bf16"), 1, 90, h100_pcie).pieces, 0);
  EXPECT_EQ(decode_geometry(qf, 1, 90, small).pieces, 0);
  EXPECT_EQ(decode_geometry(qf, 1, 90, {64, 0}).pieces, 2);    // 64 SMs x 2: 128 blocks
  EXPECT_EQ(decode_geometry(qf, 1, 90, {63, 0}).pieces, 0);
  EXPECT_EQ(arg(decode_up_spec(anchor(0, "bf16"), "sm_90a", true, 1, h100_pcie), "PIECES"), "0");
  EXPECT_EQ(decode_bulk_smem_bytes(90), 227 * 1024);
  EXPECT_EQ(decode_bulk_smem_bytes(120), 99 * 1024);
  EXPECT_EQ(decode_bulk_smem_bytes(89), 0);
  // DeepSeek-V3 fp8 at M = 1: 16 warps x 16 x 960 = 240 KB does not fit: register batches.
  g = decode_geometry(anchor(1, "fp8_block"), 1, 90);
  EXPECT_EQ(g.wpt, 8);
  EXPECT_EQ(g.pieces, 0);
  // The specs name and carry it; sm_89 keeps the register batches.
  EXPECT_EQ(arg(decode_up_spec(qf, "sm_90a", true, 1), "PIECES"), "2");
  EXPECT_EQ(arg(decode_up_spec(qf, "sm_89", true, 1), "PIECES"), "0");
  EXPECT_NE(decode_up_spec(qf, "sm_90a", true, 1).name.find("_w4p2_"), std::string::npos);
  // The down kernel follows the up kernel's path at the same M: where up takes the bulk path
  // (it routes the ids only), down writes the routing's outputs (UP_BULK) and is a kernel apart.
  const auto down1 = decode_down_spec(qf, "sm_90a", true, 1, h200);
  const auto down2 = decode_down_spec(qf, "sm_90a", true, 2, h200);
  EXPECT_EQ(arg(down1, "UP_BULK"), "true");
  EXPECT_EQ(arg(down2, "UP_BULK"), "false");
  EXPECT_EQ(arg(decode_down_spec(qf, "sm_90a", true, 1, small), "UP_BULK"), "false");
  EXPECT_EQ(arg(decode_down_spec(qf, "sm_89", true, 1, h200), "UP_BULK"), "false");
  EXPECT_NE(down1.name, down2.name);
  EXPECT_NE(down1.name.find("_ub"), std::string::npos);
  EXPECT_EQ(down2.name.find("_ub"), std::string::npos);
}

TEST(MoeDecode, SpecsCarryTheirGeometryAndRouting) {
  const MoeShape ds = anchor(1, "fp8_block");
  const auto up1 = decode_up_spec(ds, "sm_90a", true, 1);
  const auto up2 = decode_up_spec(ds, "sm_90a", true, 2);
  EXPECT_EQ(arg(up1, "WPT"), "8");
  EXPECT_EQ(arg(up2, "WPT"), "4");
  EXPECT_NE(up1.name, up2.name);  // both are prepared and cached apart
  EXPECT_EQ(arg(up1, "WFP8"), "true");
  EXPECT_EQ(arg(up1, "K"), "7168");
  EXPECT_EQ(arg(up1, "N_GROUP"), "8");  // DeepSeek's grouped routing, as routing_spec's
  EXPECT_EQ(arg(up1, "HAS_BIAS"), "true");
  EXPECT_EQ(std::count_if(up1.template_args.begin(), up1.template_args.end(),
                          [](const auto& a) { return a.first == "TOPK"; }),
            1);
  const auto down = decode_down_spec(ds, "sm_90a", false, 1);
  EXPECT_EQ(arg(down, "ROUTE"), "false");
  EXPECT_EQ(arg(down, "WPT"), "");  // the down kernel has no K split
  EXPECT_NE(down.name.find("ids"), std::string::npos);
}

TEST(MoeDecode, WorkspaceHoldsTheActivationAndNeverShrinks) {
  const GpuSpec& h200 = require_gpu("NVIDIA H200");
  for (const MoeShape& s : {anchor(0, "bf16"), anchor(0, "fp8_block"), anchor(1, "fp8_block")}) {
    const std::string d = s.source + " " + std::string(to_string(s.dtype));
    const std::int64_t max_tokens = decode_max_tokens(s);
    FusedMoe fm(s, h200);
    std::size_t prev = 0;
    for (std::int64_t M = 1; M <= 600; ++M) {
      const MoeWorkspaceLayout L = fm.workspace_layout(M);
      EXPECT_EQ(L.decode, M <= max_tokens) << d << " M=" << M;
      EXPECT_EQ(fm.uses_decode_kernels(M), M <= max_tokens);
      const std::size_t act = std::min<std::int64_t>(M, max_tokens) * s.topk * s.N * 2;
      EXPECT_GE(L.total, prev) << d << " M=" << M;
      EXPECT_GE(L.total - L.decode_act, act) << d << " M=" << M;  // the region lies inside
      prev = L.total;
    }
    FusedMoeOptions off;
    off.decode_kernels = false;
    FusedMoe staged(s, h200, {}, {}, off);
    EXPECT_FALSE(staged.uses_decode_kernels(1));
    EXPECT_FALSE(staged.workspace_layout(1).decode);
    EXPECT_LT(staged.workspace_layout(4).total, fm.workspace_layout(4).total);
  }
}

class DecodeNvrtc : public test_support::NvrtcTest {};

// The down kernel's registers (NVRTC and ptxas, no GPU): block fp8 at N = 256 with a routing
// that selects on the logits is bound to 4 blocks of 256 threads per SM (64 registers, room for
// one more block beside an up block; ptxas chose 70 without the bound), both UP_BULK variants;
// the UP_BULK one spills 8 bytes at that bound (ptxas 13.0; the layer was measured so: bench/
// results/2026-12-02_h200_eighteenth_session.md), more would be a new cost to measure.
// DeepSeek-V3's (sigmoid with groups) and bf16's keep ptxas's own choice: no bound in their PTX.
TEST_F(DecodeNvrtc, DownKernelIsBoundTo64RegistersWhereTheRoutingSelectsOnTheLogits) {
  const DecodeGpu h200{132, 227 * 1024};
  const MoeShape qf = anchor(0, "fp8_block"), ds = anchor(1, "fp8_block"), qb = anchor(0, "bf16");
  std::vector<cuda::KernelSpec> bound = {decode_down_spec(qf, "sm_90a", true, 1, h200),
                                         decode_down_spec(qf, "sm_90a", true, 2, h200)};
  ASSERT_NE(bound[0].name, bound[1].name);  // UP_BULK true, then false
  for (const auto& k : bound)
    EXPECT_NE(cuda::kernel_ptx(k).find(".minnctapersm 4"), std::string::npos) << k.name;
  for (const auto& k : {decode_down_spec(ds, "sm_90a", true, 1, h200),
                        decode_down_spec(qb, "sm_90a", true, 1, h200),
                        decode_down_spec(qb, "sm_90a", true, 2, h200)})
    EXPECT_EQ(cuda::kernel_ptx(k).find("minnctapersm"), std::string::npos) << k.name;

  test_support::ScratchJit jit("decode-test");
  for (auto& k : bound) k.options.push_back("--ptxas-options=-v");
  for (const auto& r : jit->compile_many(bound, 2)) {
    ASSERT_FALSE(r.cubin.empty()) << r.spec.name << "\n" << r.log;
    const int regs = test_support::ptxas_count(r.log, "Used ([0-9]+) registers");
    const int spills = test_support::ptxas_count(r.log, "([0-9]+) bytes spill stores");
    ASSERT_TRUE(regs >= 0 && spills >= 0) << r.log;
    EXPECT_LE(regs, 64) << r.spec.name;
    EXPECT_LE(spills, 8) << r.spec.name << "\n" << r.log;
  }
}

// route_token's layout (a lane holds experts kPer * lane + j) at router widths off the anchors'
// (router_widths.hpp; NVRTC and ptxas, no GPU): the routing kernel (ids and weights, scalar
// loads) and the decode up kernel's bulk path (ids only, 16-byte loads where a lane's share is
// whole vectors) compile without spills, and forward() takes the decode kernels there.
TEST_F(DecodeNvrtc, RoutingCompilesWithoutSpillsAtOtherRouterWidths) {
  const DecodeGpu h200{132, 227 * 1024};
  std::vector<cuda::KernelSpec> specs;
  for (const MoeShape& s : test_support::off_anchor_router_widths()) {
    ASSERT_EQ(decode_kernels_unfit(s), "") << s.E_global;
    const FusedMoe fm(s, require_gpu("NVIDIA H200"));  // as gpu_test_moe_decode runs them
    EXPECT_TRUE(fm.uses_decode_kernels(1) && fm.uses_decode_kernels(2)) << s.E_global;
    specs.push_back(routing_spec(s, "sm_90a"));
    specs.push_back(decode_up_spec(s, "sm_90a", true, 1, h200));
    EXPECT_NE(arg(specs.back(), "PIECES"), "0") << s.E_global;  // the bulk path: the ids alone
  }
  test_support::ScratchJit jit("routing-test");
  for (auto& k : specs) k.options.push_back("--ptxas-options=-v");
  for (const auto& r : jit->compile_many(specs, 2)) {
    ASSERT_FALSE(r.cubin.empty()) << r.spec.name << "\n" << r.log;
    const int spills = test_support::ptxas_count(r.log, "([0-9]+) bytes spill stores");
    ASSERT_GE(spills, 0) << r.log;
    EXPECT_EQ(spills, 0) << r.spec.name << "\n" << r.log;
  }
}

}  // namespace
}  // namespace moetune::moe
