// The grouped GEMM's host side on the CPU: tiling rules, the shared-memory formula, instance
// names and template arguments, grid and workspace bounds, and NVRTC compiles of representative
// instances for sm_80 / sm_89 / sm_90a / sm_120 (no GPU needed).
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "cuda/jit.hpp"
#include "cuda/nvrtc.hpp"
#include "gemm/gemm.hpp"
#include "kernels/common/tile_math.cuh"
#include "moetune/error.hpp"
#include "gemm_test_util.hpp"
#include "nvrtc_test.hpp"

namespace moetune::gemm {
namespace {

namespace tm = tile_math;

using testing::cfg;
using testing::make_shape;

MoeShape qwen_tp4(Dtype d, bool block) { return make_shape(256, 256, 3072, 8, d, block); }

TEST(GemmTileRules, AcceptsDecodeAndPrefillTiles) {
  EXPECT_EQ(tm::tile_rule_violation(16, 64, 128, 4, 4, 1, 2, 2), nullptr);
  EXPECT_EQ(tm::tile_rule_violation(16, 128, 64, 8, 3, 4, 2, 2), nullptr);  // N across 8 warps
  EXPECT_EQ(tm::tile_rule_violation(128, 128, 64, 4, 3, 1, 2, 2), nullptr);
  EXPECT_EQ(tm::tile_rule_violation(128, 256, 64, 8, 3, 1, 2, 2), nullptr);
  EXPECT_EQ(tm::tile_rule_violation(64, 128, 128, 4, 4, 2, 1, 1), nullptr);  // block fp8
  EXPECT_EQ(tm::tile_rule_violation(128, 128, 128, 4, 3, 1, 1, 1, false), nullptr);  // fp8 tensor
}

TEST(GemmTileRules, RejectsWithAReason) {
  // 8 warps cannot split a 16 x 32 tile in 16 x 16 warp tiles
  const char* r = tm::tile_rule_violation(16, 32, 64, 8, 3, 1, 2, 2);
  ASSERT_NE(r, nullptr);
  EXPECT_NE(std::string(r).find("warp tiling"), std::string::npos);
  // 256 x 256 over 4 warps: 512 accumulators per thread
  r = tm::tile_rule_violation(256, 256, 64, 4, 3, 1, 2, 2);
  ASSERT_NE(r, nullptr);
  EXPECT_NE(std::string(r).find("128"), std::string::npos);
  // block fp8 needs a second accumulator set: 128 x 128 over 4 warps is too much
  r = tm::tile_rule_violation(128, 128, 128, 4, 3, 1, 1, 1, true);
  ASSERT_NE(r, nullptr);
  EXPECT_NE(std::string(r).find("block fp8"), std::string::npos);
  EXPECT_NE(tm::tile_rule_violation(64, 64, 64, 4, 1, 1, 2, 2), nullptr);   // num_stages 1
  EXPECT_NE(tm::tile_rule_violation(64, 64, 64, 4, 3, 17, 2, 2), nullptr);  // SPLIT_K > 16
  EXPECT_NE(tm::tile_rule_violation(64, 64, 32, 4, 3, 1, 1, 1), nullptr);   // 32 B fp8 rows
  EXPECT_NE(tm::tile_rule_violation(24, 64, 64, 4, 3, 1, 2, 2), nullptr);   // BM not x16
}

// Over the whole classic search space (x SPLIT_K 1/2/4): every config the tile rules accept is
// accepted by gemm_kernel_spec for a shape it fits, and every wgmma-eligible config also passes
// the tile rules (the wgmma kernel static_asserts both).
TEST(GemmTileRules, SearchSpaceIsConsistent) {
  int accepted = 0, wgmma = 0;
  for (bool fp8 : {false, true})
    for (int bm : {16, 32, 64, 128, 256})
      for (int bn : {32, 64, 128, 256})
        for (int bk : {64, 128, 256})
          for (int w : {4, 8})
            for (int st : {2, 3, 4, 5})
              for (int sk : {1, 2, 4}) {
                const int bytes = fp8 ? 1 : 2;
                const bool ok = tm::tile_rule_violation(bm, bn, bk, w, st, sk, bytes, bytes, fp8) == nullptr;
                const bool wg = tm::gemm_wgmma_eligible(bm, bn, bk, w, bytes, fp8);
                EXPECT_TRUE(!wg || ok) << bm << "x" << bn << "x" << bk << " w" << w;
                if (!ok || (fp8 && bk > 128)) continue;  // block fp8: BK must divide 128
                ++accepted;
                wgmma += wg;
                const auto shape = qwen_tp4(fp8 ? Dtype::fp8_w8a8 : Dtype::bf16, fp8);
                EXPECT_NO_THROW(gemm_kernel_spec(shape, cfg(bm, bn, bk, 1, w, st, sk), GemmStage::up, "sm_90a"))
                    << bm << "x" << bn << "x" << bk << " w" << w << " s" << st << " sk" << sk;
              }
  EXPECT_GT(accepted, 500);
  EXPECT_GT(wgmma, 50);
}

TEST(GemmTileRules, WarpGridIsSquarest) {
  EXPECT_EQ(tm::gemm_warps_m(16, 64, 4), 1);    // 16 x 16 per warp
  EXPECT_EQ(tm::gemm_warps_m(64, 64, 4), 2);    // 32 x 32
  EXPECT_EQ(tm::gemm_warps_m(128, 256, 8), 2);  // 64 x 64
  EXPECT_EQ(tm::gemm_warps_m(256, 128, 8), 4);  // 64 x 64
  EXPECT_EQ(tm::gemm_warps_m(16, 32, 8), 0);
}

TEST(GemmTileRules, SharedMemoryFormula) {
  // 4 stages of (16x128 + 64x128) bf16 + 16 slots + ticket
  EXPECT_EQ(tm::gemm_smem_bytes(16, 64, 128, 4, 2, 2, false), 4 * (16 * 256 + 64 * 256) + 64 + 16);
  // fp8 128x256x128, 4 stages: 196,608 + 512 + 16 + 4 x 16 of mbarriers (above the 101,376 B
  // of an RTX PRO 6000); per-tensor fp8 has no mbarriers
  EXPECT_EQ(tm::gemm_smem_bytes(128, 256, 128, 4, 1, 1, true), 197200);
  EXPECT_EQ(tm::gemm_smem_bytes(128, 256, 128, 4, 1, 1, false), 197136);
  EXPECT_GT(tm::gemm_smem_bytes(128, 256, 128, 4, 1, 1, true), 101376);
  EXPECT_EQ(tm::reference_smem_bytes(128, 256, 128, 4, 1), 3 * 384 * 128);
  // swizzle is a permutation of the chunks of each row
  for (int chunks : {4, 8, 16, 32})
    for (int row = 0; row < 16; ++row) {
      unsigned long long seen = 0;
      for (int c = 0; c < chunks; ++c) seen |= 1ULL << tm::swizzle_chunk(row, c, chunks);
      EXPECT_EQ(seen, (1ULL << chunks) - 1) << chunks << " " << row;
    }
}

// The warp-specialized kernel's blocks per SM and register split (tile_math.cuh says why).
TEST(GemmTileRules, WarpSpecializedBlocksPerSm) {
  // fp8 GEMM1 m64n64k128 w4 s4 (the default at M >= 1024): 65,872 B, 3 blocks fit 228 KiB; the
  // launch gets 80 registers x 256 threads; the producer keeps 48, the consumers take 112.
  EXPECT_EQ(tm::gemm_wgmma_min_blocks(true, 3072, 64, 64, 128, 4, 4, 1), 3);
  EXPECT_EQ(tm::gemm_ws_consumer_regs(128, 3), 112);
  EXPECT_EQ(tm::gemm_wgmma_min_blocks(true, 7168, 64, 64, 128, 4, 2, 2), 3);  // 4 fit; 80 regs < 96
  EXPECT_EQ(tm::gemm_ws_consumer_regs(128, 4), 80);
  EXPECT_EQ(tm::gemm_wgmma_min_blocks(true, 3072, 64, 64, 128, 4, 5, 1), 0);    // 2 fit by smem
  EXPECT_EQ(tm::gemm_wgmma_min_blocks(true, 3072, 64, 128, 128, 4, 3, 1), 0);   // 64 acc: needs 160
  EXPECT_EQ(tm::gemm_wgmma_min_blocks(true, 3072, 128, 64, 128, 8, 2, 1), 0);   // 384 threads
  EXPECT_EQ(tm::gemm_wgmma_min_blocks(false, 3072, 64, 64, 128, 4, 4, 1), 0);   // not block fp8
  EXPECT_EQ(tm::gemm_wgmma_min_blocks(true, 256, 64, 64, 128, 4, 4, 1), 0);     // GEMM2: 2 K-tiles
  EXPECT_EQ(tm::gemm_wgmma_min_blocks(true, 3072, 64, 64, 128, 4, 4, 4), 0);    // 6 K-tiles a split
  EXPECT_EQ(tm::gemm_wgmma_min_blocks(true, 7168, 64, 64, 128, 4, 4, 4), 0);    // SPLIT_K 4 spills
  EXPECT_EQ(tm::gemm_wgmma_min_blocks(true, 7168, 64, 64, 128, 4, 4, 2), 3);
  // Wherever it applies: the blocks fit the SM's shared memory and the split fits the launch's
  // register pool (no setmaxnreg.inc waits forever), and the consumers get at least the launch's.
  int applied = 0;
  for (int bm : {64, 128, 256})
    for (int bn : {64, 128, 256})
      for (int w : {4, 8})
        for (int st = 2; st <= 5; ++st)
          for (int sk : {1, 2, 4, 8}) {
          if (!tm::gemm_wgmma_eligible(bm, bn, 128, w, 1, true)) continue;
          const int b = tm::gemm_wgmma_min_blocks(true, 7168, bm, bn, 128, w, st, sk);
          if (b == 0) continue;
          ++applied;
          const int threads = w * 32 + tm::kWgmmaProducerThreads;
          const int smem = tm::gemm_smem_bytes(bm, bn, 128, st, 1, 1, true);
          const int launch = tm::kSm90RegsPerSm / (threads * b) / 8 * 8;
          const int cons = tm::gemm_ws_consumer_regs(w * 32, b);
          EXPECT_LE(b * (smem + tm::kSm90SmemReservedPerBlock), tm::kSm90SmemPerSm);
          EXPECT_LE(cons * w * 32 + tm::kWsProducerRegs * tm::kWgmmaProducerThreads,
                    launch * threads);
          EXPECT_GE(cons, launch);  // setmaxnreg.inc may only raise the count
          EXPECT_LE(tm::kWsProducerRegs, launch);  // and .dec only lower it
          EXPECT_GE(tm::kWsProducerRegs, 24);
          EXPECT_LE(cons, 256);
          EXPECT_EQ(cons % 8, 0);
        }
  EXPECT_EQ(applied, 6);  // m64n64 w4 at 2, 3 and 4 stages, SPLIT_K 1 and 2
}

TEST(GemmSpec, NameAndTemplateArguments) {
  const auto spec = gemm_kernel_spec(qwen_tp4(Dtype::fp8_w8a8, true), cfg(16, 64, 128, 1, 4, 4),
                                     GemmStage::up, "sm_90a");
  EXPECT_EQ(spec.name, "moe_gemm_up_fp8b_m16n64k128_g1_w4_s4_sk1_N256_K3072_topk8_b128x128");
  EXPECT_EQ(spec.file, "moe_gemm_mma.cuh");
  EXPECT_EQ(spec.kernel, "moetune::moe_gemm_mma");
  ASSERT_EQ(spec.template_args.size(), 16u);
  EXPECT_EQ(spec.template_args[0].first, "STAGE");
  EXPECT_EQ(spec.template_args[1], (std::pair<std::string, std::string>{"DTYPE", "2"}));
  EXPECT_EQ(spec.template_args[5].second, "128");  // SCALE_BLOCK_N
  EXPECT_EQ(spec.template_args[7], (std::pair<std::string, std::string>{"BLOCK_SIZE_M", "16"}));
  EXPECT_EQ(spec.template_args[13], (std::pair<std::string, std::string>{"SPLIT_K", "1"}));
  EXPECT_EQ(spec.template_args[14], (std::pair<std::string, std::string>{"FUSED_ACT", "0"}));
  EXPECT_EQ(spec.template_args[15], (std::pair<std::string, std::string>{"SUM_TOPK", "0"}));
  EXPECT_EQ(spec.name_expression(),
            "moetune::moe_gemm_mma<0, 2, 256, 3072, 8, 128, 128, 16, 64, 128, 1, 4, 4, 1, 0, 0>");

  const auto down = gemm_kernel_spec(qwen_tp4(Dtype::bf16, false), cfg(64, 128, 64, 8, 4, 3, 2),
                                     GemmStage::down, "sm_80");
  EXPECT_EQ(down.name, "moe_gemm_down_bf16_m64n128k64_g8_w4_s3_sk2_N256_K3072_topk8");
}

// GEMM2 with the top-k sum folded in (down_sum): its own instance (SUM_TOPK = 1, the down
// stage's other arguments), on either kernel, sm_90+ only (red.global.add of bf16/fp16); the
// down stage's grid, block, shared memory and workspace.
TEST(GemmSpec, DownSumInstance) {
  const auto bf16 = qwen_tp4(Dtype::bf16, false);
  const auto fp8 = qwen_tp4(Dtype::fp8_w8a8, true);
  const auto c = cfg(16, 64, 128, 1, 4, 3);
  const auto spec = gemm_kernel_spec(bf16, c, GemmStage::down_sum, "sm_90a");
  EXPECT_EQ(spec.name, "moe_gemm_down_sum_bf16_m16n64k128_g1_w4_s3_sk1_N256_K3072_topk8");
  EXPECT_EQ(spec.file, "moe_gemm_mma.cuh");
  EXPECT_EQ(spec.name_expression(),
            "moetune::moe_gemm_mma<1, 0, 256, 3072, 8, 0, 0, 16, 64, 128, 1, 4, 3, 1, 0, 1>");
  const auto plain = gemm_kernel_spec(bf16, c, GemmStage::down, "sm_90a");
  EXPECT_EQ(plain.template_args.back().second, "0");
  const auto sw = gemm_kernel_spec(fp8, testing::swapped(cfg(16, 128, 128, 1, 4, 2)),
                                   GemmStage::down_sum, "sm_90a");
  EXPECT_EQ(sw.file, "moe_gemm_wgmma_sm90a.cuh");
  EXPECT_EQ(sw.template_args.end()[-2], (std::pair<std::string, std::string>{"SUM_TOPK", "1"}));
  EXPECT_EQ(sw.template_args.back(), (std::pair<std::string, std::string>{"ALIGN_E", "0"}));
  EXPECT_EQ(sw.name,
            "moe_gemm_down_sum_fp8b_wgmma_m16n128k128_g1_w4_s2_sk1_ab1_N256_K3072_topk8_b128x128");
  EXPECT_FALSE(gemm_stage_is_up(GemmStage::down_sum));
  EXPECT_EQ(gemm_out_cols(bf16, GemmStage::down_sum), 3072);
  EXPECT_STREQ(to_string(GemmStage::down_sum), "down_sum");
  for (const std::string arch : {"sm_90a", "sm_120"}) {
    const auto a = gemm_launch_geometry(bf16, c, GemmStage::down, 64, 64 * 8 + 256 * 15, arch);
    const auto b = gemm_launch_geometry(bf16, c, GemmStage::down_sum, 64, 64 * 8 + 256 * 15, arch);
    EXPECT_EQ(a.grid.x, b.grid.x) << arch;
    EXPECT_EQ(a.block.x, b.block.x) << arch;
    EXPECT_EQ(a.smem_bytes, b.smem_bytes) << arch;
  }
  EXPECT_EQ(gemm_workspace_bytes(bf16, cfg(16, 64, 64, 1, 4, 3, 2), GemmStage::down_sum, 64),
            gemm_workspace_bytes(bf16, cfg(16, 64, 64, 1, 4, 3, 2), GemmStage::down, 64));
  for (const char* arch : {"sm_80", "sm_89"}) {
    try {
      (void)gemm_kernel_spec(bf16, c, GemmStage::down_sum, arch);
      ADD_FAILURE() << arch << ": down_sum accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(e.field(), "stage") << arch;
      EXPECT_EQ(e.value(), "down_sum") << arch;
    }
  }
}

// GEMM1 with SiLU(gate)·up fused (up_act): its own instance (name, FUSED_ACT = 1, so its own
// cubin cache key), the up stage's grid and workspace, out [M*topk, N]; bf16/fp16 only.
TEST(GemmSpec, FusedActInstance) {
  const auto bf16 = qwen_tp4(Dtype::bf16, false);
  const auto fp16 = qwen_tp4(Dtype::fp16, false);
  const auto c = cfg(16, 64, 128, 1, 4, 3, 2);
  const auto spec = gemm_kernel_spec(bf16, c, GemmStage::up_act, "sm_90a");
  EXPECT_EQ(spec.name, "moe_gemm_up_act_bf16_m16n64k128_g1_w4_s3_sk2_N256_K3072_topk8");
  EXPECT_EQ(spec.file, "moe_gemm_mma.cuh");
  ASSERT_EQ(spec.template_args.size(), 16u);
  EXPECT_EQ(spec.template_args[0], (std::pair<std::string, std::string>{"STAGE", "0"}));
  EXPECT_EQ(spec.template_args[14], (std::pair<std::string, std::string>{"FUSED_ACT", "1"}));
  EXPECT_EQ(spec.name_expression(),
            "moetune::moe_gemm_mma<0, 0, 256, 3072, 8, 0, 0, 16, 64, 128, 1, 4, 3, 2, 1, 0>");
  EXPECT_NE(spec.name, gemm_kernel_spec(bf16, c, GemmStage::up, "sm_90a").name);
  const auto wg = gemm_kernel_spec(fp16, cfg(128, 256, 64, 16, 8, 3), GemmStage::up_act, "sm_90a");
  EXPECT_EQ(wg.file, "moe_gemm_wgmma_sm90a.cuh");
  EXPECT_EQ(wg.name, "moe_gemm_up_act_fp16_wgmma_m128n256k64_g16_w8_s3_sk1_N256_K3072_topk8");
  EXPECT_EQ(wg.template_args[14].second, "1");
  // Same grid, block, shared memory and split-K workspace as the unfused GEMM1.
  for (const std::string arch : {"sm_80", "sm_90a"}) {
    const auto a = gemm_launch_geometry(bf16, c, GemmStage::up, 64, 64 * 8 + 256 * 15, arch);
    const auto b = gemm_launch_geometry(bf16, c, GemmStage::up_act, 64, 64 * 8 + 256 * 15, arch);
    EXPECT_EQ(a.grid.x, b.grid.x);
    EXPECT_EQ(a.grid.y, b.grid.y);
    EXPECT_EQ(a.block.x, b.block.x);
    EXPECT_EQ(a.smem_bytes, b.smem_bytes);
  }
  EXPECT_EQ(gemm_workspace_bytes(bf16, c, GemmStage::up, 64),
            gemm_workspace_bytes(bf16, c, GemmStage::up_act, 64));
  EXPECT_EQ(gemm_out_cols(bf16, GemmStage::up), 512);
  EXPECT_EQ(gemm_out_cols(bf16, GemmStage::up_act), 256);
  EXPECT_EQ(gemm_out_cols(bf16, GemmStage::down), 3072);
  EXPECT_TRUE(gemm_stage_is_up(GemmStage::up_act));
  EXPECT_FALSE(gemm_stage_is_up(GemmStage::down));
  EXPECT_STREQ(to_string(GemmStage::up_act), "up_act");
  // The layer fuses up to 8 slots per expert (E=256, topk 8: M <= 256): 16-bit dtypes with any
  // config, block fp8 with a swap-AB tile whose blocks hold whole block_k groups (n256), never
  // per-tensor fp8.
  for (const auto& s : {bf16, fp16}) {
    EXPECT_EQ(gemm1_stage(s, 1, c), GemmStage::up_act);
    EXPECT_EQ(gemm1_stage(s, 256, c), GemmStage::up_act);
    EXPECT_EQ(gemm1_stage(s, 257, c), GemmStage::up);
    EXPECT_EQ(gemm1_stage(s, 4096, c), GemmStage::up);
  }
  KernelConfig swap256 = cfg(16, 256, 128, 1, 4, 3), swap128 = cfg(16, 128, 128, 1, 4, 3),
               swap256w16 = cfg(16, 256, 128, 1, 16, 3);
  swap256.SWAP_AB = swap128.SWAP_AB = swap256w16.SWAP_AB = 1;
  const auto fp8b = qwen_tp4(Dtype::fp8_w8a8, true), fp8t = qwen_tp4(Dtype::fp8_w8a8, false);
  EXPECT_EQ(gemm1_stage(fp8b, 1, swap256), GemmStage::up_act);
  EXPECT_EQ(gemm1_stage(fp8b, 256, swap256), GemmStage::up_act);
  EXPECT_EQ(gemm1_stage(fp8b, 257, swap256), GemmStage::up);
  EXPECT_EQ(gemm1_stage(fp8b, 8, swap128), GemmStage::up);     // 64 columns: half a group
  EXPECT_EQ(gemm1_stage(fp8b, 8, swap256w16), GemmStage::up);  // 64 rows per warpgroup
  EXPECT_EQ(gemm1_stage(fp8b, 8, cfg(16, 256, 128, 1, 4, 3)), GemmStage::up);  // not swap-AB
  for (int64_t M : {1, 4096}) EXPECT_EQ(gemm1_stage(fp8t, M, swap256), GemmStage::up);
  // N not a multiple of block_k (N = 192, block [64, 128]): never fused (a block's group would
  // run past the row).
  auto n192 = make_shape(64, 192, 2048, 6, Dtype::fp8_w8a8, false);
  n192.block_shape = std::array<int, 2>{64, 128};
  EXPECT_EQ(gemm1_stage(n192, 1, swap256), GemmStage::up);
  // Every config gemm1_stage fuses is one gemm_kernel_spec accepts as up_act, and the configs it
  // accepts as up that gemm1_stage leaves unfused are the ones it refuses as up_act (sm_90a).
  int fused = 0, checked = 0;
  for (const auto& shape : {fp8b, qwen_tp4(Dtype::bf16, false), n192,
                            make_shape(256, 256, 7168, 8, Dtype::fp8_w8a8, true)})
    for (int bm : {16, 32, 64, 128})
      for (int bn : {64, 128, 256})
        for (int bk : {64, 128})
          for (int w : {4, 8, 16})
            for (int sk : {1, 2, 4})
              for (int swap : {0, 1}) {
                KernelConfig k = cfg(bm, bn, bk, 1, w, 3, sk);
                k.SWAP_AB = swap;
                try {
                  gemm_kernel_spec(shape, k, GemmStage::up, "sm_90a");
                } catch (const InputError&) {
                  continue;
                }
                ++checked;
                bool accepts = true;
                try {
                  gemm_kernel_spec(shape, k, GemmStage::up_act, "sm_90a");
                } catch (const InputError&) {
                  accepts = false;
                }
                const bool fuses = gemm1_stage(shape, 1, k) == GemmStage::up_act;
                EXPECT_EQ(fuses, accepts) << config_name(k);
                fused += fuses && shape.dtype == Dtype::fp8_w8a8;
              }
  EXPECT_GT(checked, 100);
  EXPECT_GT(fused, 4);
}

TEST(GemmSpec, FusedActRefusals) {
  // Per-tensor fp8 keeps its activation stages (the global amax comes first).
  auto refused = [](const MoeShape& s, const KernelConfig& c, const char* field,
                    const char* words) {
    try {
      gemm_kernel_spec(s, c, GemmStage::up_act, "sm_90a");
      ADD_FAILURE() << "fused activation accepted for " << config_name(c);
    } catch (const InputError& e) {
      EXPECT_EQ(e.field(), field) << e.what();
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  refused(qwen_tp4(Dtype::fp8_w8a8, false), cfg(16, 64, 128, 1, 4, 3), "stage", "per-tensor");
  // Block fp8 fuses on the swap-AB path only, with whole 128-column groups per block.
  const auto fp8b = qwen_tp4(Dtype::fp8_w8a8, true);
  refused(fp8b, cfg(16, 256, 128, 1, 4, 3), "SWAP_AB", "swap-AB");
  KernelConfig swap128 = cfg(16, 128, 128, 1, 4, 3);
  swap128.SWAP_AB = 1;
  refused(fp8b, swap128, "BLOCK_SIZE_N", "multiple of block_k");
  // N = 192 with block [64, 128]: a block's 128-column group would run past the row.
  auto n192 = make_shape(64, 192, 2048, 6, Dtype::fp8_w8a8, false);
  n192.block_shape = std::array<int, 2>{64, 128};
  KernelConfig swap256_n192 = swap128;
  swap256_n192.BLOCK_SIZE_N = 256;
  refused(n192, swap256_n192, "N", "N to be a multiple of block_k");
  KernelConfig swap256 = swap128;
  swap256.BLOCK_SIZE_N = 256;
  // N = 384 with 512-column tiles: the quantizing epilogue has no column tail.
  KernelConfig swap512 = swap128;
  swap512.BLOCK_SIZE_N = 512;
  swap512.num_warps = 8;
  auto n384 = fp8b;
  n384.N = 384;
  refused(n384, swap512, "BLOCK_SIZE_N", "column tail");
  const auto spec = gemm_kernel_spec(fp8b, swap256, GemmStage::up_act, "sm_90a");
  EXPECT_EQ(spec.name, "moe_gemm_up_act_fp8b_wgmma_m16n256k128_g1_w4_s3_sk1_ab1_N256_K3072_topk8_b128x128");
  EXPECT_EQ(spec.template_args[14].second, "1");  // FUSED_ACT
  // N not a multiple of 8: the gate/up halves would not be whole n8 chunks.
  try {
    gemm_kernel_spec(make_shape(64, 100, 2048, 6, Dtype::bf16, false), cfg(16, 64, 128, 1, 4, 3),
                     GemmStage::up_act, "sm_90a");
    FAIL() << "N % 8 != 0 accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "N");
  }
  // The slice rule itself (unreachable through the tile rules, which keep warp slices multiples
  // of 16 and wgmma slices 64/128/256, but static_asserted by both kernels).
  EXPECT_EQ(tm::gemm_act_violation(true, false, 256, 16), nullptr);
  EXPECT_EQ(tm::gemm_act_violation(true, false, 256, 256), nullptr);
  const char* r = tm::gemm_act_violation(true, false, 256, 24);
  ASSERT_NE(r, nullptr);
  EXPECT_NE(std::string(r).find("multiple of 8"), std::string::npos);
  EXPECT_NE(tm::gemm_act_violation(true, false, 256, 8), nullptr);
  EXPECT_NE(tm::gemm_act_violation(false, false, 256, 64), nullptr);  // down
  EXPECT_NE(tm::gemm_act_violation(true, tm::kDtypeFp8Tensor, 256, 64), nullptr);
  EXPECT_NE(tm::gemm_act_violation(true, tm::kDtypeFp8Block, 256, 128), nullptr);  // not swap-AB
  EXPECT_NE(tm::gemm_act_violation(true, tm::kDtypeFp8Block, 256, 128, true, 128, 128), nullptr);
  EXPECT_EQ(tm::gemm_act_violation(true, tm::kDtypeFp8Block, 256, 256, true, 256, 128), nullptr);
  EXPECT_NE(tm::gemm_act_violation(true, tm::kDtypeFp8Block, 256, 256, true, 256, 64), nullptr);
  EXPECT_NE(tm::gemm_act_violation(true, tm::kDtypeFp8Block, 192, 256, true, 256, 128), nullptr);
  // A column tail (2N = 768 against 512-column tiles): the quantizing epilogue would write past
  // the row; 2N a multiple of the tile is fine.
  r = tm::gemm_act_violation(true, tm::kDtypeFp8Block, 384, 256, true, 512, 128);
  ASSERT_NE(r, nullptr);
  EXPECT_NE(std::string(r).find("column tail"), std::string::npos);
  EXPECT_EQ(tm::gemm_act_violation(true, tm::kDtypeFp8Block, 512, 256, true, 512, 128), nullptr);
  EXPECT_NE(tm::gemm_act_violation(true, false, 196, 64), nullptr);   // N % 8
  // Every config of the classic space that the tile rules accept also fuses (bf16, sm_80 mma and
  // sm_90a wgmma slices), N-tails included (N = 192 with BLOCK_SIZE_N 256: 128 columns per tile).
  const auto odd = make_shape(64, 192, 2048, 6, Dtype::bf16, false);
  int accepted = 0;
  for (int bm : {16, 32, 64, 128, 256})
    for (int bn : {32, 64, 128, 256})
      for (int bk : {64, 128, 256})
        for (int w : {4, 8}) {
          if (tm::tile_rule_violation(bm, bn, bk, w, 3, 1, 2, 2, false) != nullptr) continue;
          for (const std::string arch : {"sm_80", "sm_90a"}) {
            EXPECT_NO_THROW(gemm_kernel_spec(odd, cfg(bm, bn, bk, 1, w, 3), GemmStage::up_act, arch))
                << bm << " " << bn << " " << bk << " " << w << " " << arch;
            ++accepted;
          }
        }
  EXPECT_GT(accepted, 50);
}

TEST(GemmSpec, PicksWgmmaOnSm90aForEligibleTiles) {
  const auto bf16 = qwen_tp4(Dtype::bf16, false);
  const auto fp8 = qwen_tp4(Dtype::fp8_w8a8, true);
  EXPECT_TRUE(gemm_uses_wgmma(bf16, cfg(128, 128, 64, 16, 8, 4), "sm_90a"));
  EXPECT_FALSE(gemm_uses_wgmma(bf16, cfg(128, 128, 64, 16, 8, 4), "sm_89"));
  EXPECT_FALSE(gemm_uses_wgmma(bf16, cfg(128, 128, 128, 16, 8, 4), "sm_90a"));  // 256-byte rows
  EXPECT_FALSE(gemm_uses_wgmma(bf16, cfg(16, 64, 64, 1, 4, 4), "sm_90a"));      // m16 tile
  EXPECT_TRUE(gemm_uses_wgmma(fp8, cfg(64, 128, 128, 8, 4, 4), "sm_90a"));
  EXPECT_FALSE(gemm_uses_wgmma(fp8, cfg(128, 128, 128, 8, 4, 4), "sm_90a"));  // 2x128 acc
  const auto spec = gemm_kernel_spec(bf16, cfg(128, 128, 64, 16, 8, 4), GemmStage::down, "sm_90a");
  EXPECT_EQ(spec.file, "moe_gemm_wgmma_sm90a.cuh");
  EXPECT_EQ(spec.kernel, "moetune::moe_gemm_wgmma");
  EXPECT_EQ(spec.name, "moe_gemm_down_bf16_wgmma_m128n128k64_g16_w8_s4_sk1_N256_K3072_topk8");
  EXPECT_EQ(gemm_kernel_spec(bf16, cfg(128, 128, 64, 16, 8, 4), GemmStage::down, "sm_80").file,
            "moe_gemm_mma.cuh");
}

// SWAP_AB 1 is the wgmma kernel's swap-AB instance on sm_90a; anywhere else, or with a tile it
// cannot run, gemm_kernel_spec refuses it naming the key or the config.
TEST(GemmSpec, SwapAbInstanceAndRefusals) {
  const auto fp8 = qwen_tp4(Dtype::fp8_w8a8, true);
  const auto bf16 = qwen_tp4(Dtype::bf16, false);
  KernelConfig c = testing::swapped(cfg(16, 128, 128, 1, 4, 3));
  EXPECT_TRUE(gemm_uses_wgmma(fp8, c, "sm_90a"));
  EXPECT_FALSE(gemm_uses_wgmma(fp8, c, "sm_120"));
  const auto spec = gemm_kernel_spec(fp8, c, GemmStage::down, "sm_90a");
  EXPECT_EQ(spec.file, "moe_gemm_wgmma_sm90a.cuh");
  // The wgmma kernel's last three: SWAP_AB, SUM_TOPK, ALIGN_E (0: the alignment's tables).
  EXPECT_EQ(spec.template_args.end()[-3], (std::pair<std::string, std::string>{"SWAP_AB", "1"}));
  EXPECT_EQ(spec.template_args.end()[-2], (std::pair<std::string, std::string>{"SUM_TOPK", "0"}));
  EXPECT_EQ(spec.template_args.back(), (std::pair<std::string, std::string>{"ALIGN_E", "0"}));
  EXPECT_EQ(spec.name, "moe_gemm_down_fp8b_wgmma_m16n128k128_g1_w4_s3_sk1_ab1_N256_K3072_topk8_b128x128");
  EXPECT_EQ(gemm_kernel_spec(fp8, cfg(64, 128, 128, 8, 4, 3), GemmStage::up, "sm_90a")
                .template_args.end()[-3],
            (std::pair<std::string, std::string>{"SWAP_AB", "0"}));
  try {
    (void)gemm_kernel_spec(fp8, c, GemmStage::up, "sm_120");
    ADD_FAILURE() << "sm_120 ran swap-AB";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "SWAP_AB");
  }
  for (const KernelConfig& bad : {testing::swapped(cfg(64, 128, 128, 8, 4, 3)),
                                  testing::swapped(cfg(16, 128, 64, 1, 4, 3))}) {
    EXPECT_THROW((void)gemm_kernel_spec(fp8, bad, GemmStage::up, "sm_90a"), InputError)
        << config_name(bad);
  }
  // 16-bit: 64 weight rows per warpgroup run unfused, not fused (no gate/up slice pair).
  const KernelConfig n64 = testing::swapped(cfg(16, 64, 64, 1, 4, 3));
  EXPECT_NO_THROW((void)gemm_kernel_spec(bf16, n64, GemmStage::down, "sm_90a"));
  EXPECT_THROW((void)gemm_kernel_spec(bf16, n64, GemmStage::up_act, "sm_90a"), InputError);
  EXPECT_NO_THROW((void)gemm_kernel_spec(bf16, testing::swapped(cfg(16, 128, 64, 1, 4, 3)),
                                         GemmStage::up_act, "sm_90a"));
}

TEST(GemmSpec, RefusesWhatTheKernelCannotRun) {
  auto fp8 = qwen_tp4(Dtype::fp8_w8a8, true);
  try {
    gemm_kernel_spec(fp8, cfg(64, 128, 256, 1, 4, 3), GemmStage::up, "sm_90a");
    FAIL() << "BLOCK_SIZE_K 256 straddles a 128 scale group";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "BLOCK_SIZE_K");
  }
  try {
    gemm_kernel_spec(fp8, cfg(64, 128, 128, 1, 4, 3), GemmStage::up, "sm_80");
    FAIL() << "fp8 on sm_80";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "dtype");
  }
  try {  // down reduces over N = 256: 4 K-tiles of 64 cannot feed SPLIT_K 8
    gemm_kernel_spec(qwen_tp4(Dtype::bf16, false), cfg(16, 64, 64, 1, 4, 3, 8), GemmStage::down,
                     "sm_90a");
    FAIL() << "SPLIT_K beyond the K-tiles";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "SPLIT_K");
  }
  try {
    gemm_kernel_spec(qwen_tp4(Dtype::bf16, false), cfg(16, 32, 64, 1, 8, 3), GemmStage::up,
                     "sm_90a");
    FAIL() << "no warp tiling";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "config");
  }
}

TEST(GemmSpec, GridAndWorkspaceBounds) {
  const auto s = qwen_tp4(Dtype::bf16, false);
  const auto c = cfg(16, 64, 128, 1, 4, 4, 4);
  // M=1, topk 8: at most 1 block of slots + 8 experts
  EXPECT_EQ(gemm_max_m_blocks(s, c, 1, 8 + 256 * 15), 9);
  // capacity caps it too
  EXPECT_EQ(gemm_max_m_blocks(s, c, 1024, 64), 4);
  // whole blocks of the capacity only: the kernels read a block's tables before the total
  EXPECT_EQ(gemm_max_m_blocks(s, c, 1024, 79), 4);
  EXPECT_EQ(gemm_max_m_blocks(s, c, 1024, 80), 5);
  EXPECT_EQ(gemm_max_m_blocks(s, c, 0, 4096), 0);
  const auto g = gemm_launch_geometry(s, c, GemmStage::up, 1, 8 + 256 * 15, "sm_90a");
  EXPECT_EQ(g.grid.x, 9u * (512 / 64));
  EXPECT_EQ(g.grid.y, 4u);
  EXPECT_EQ(g.block.x, 128u);
  EXPECT_EQ(g.smem_bytes, static_cast<std::size_t>(tm::gemm_smem_bytes(16, 64, 128, 4, 2, 2, false)));
  // sm_90a block fp8 wgmma tiles over >= 8 K-tiles per split: the consumer warps plus one
  // producer warpgroup (GEMM1, K = 3072: 24 tiles; split 4 ways: 6, no producer; GEMM2, N = 256: 2)
  const auto f = qwen_tp4(Dtype::fp8_w8a8, true);
  const auto w = cfg(128, 128, 128, 8, 8, 4);
  EXPECT_TRUE(gemm_uses_wgmma(f, w, "sm_90a"));
  EXPECT_EQ(gemm_launch_geometry(f, w, GemmStage::up, 4096, 40000, "sm_90a").block.x, 384u);
  EXPECT_EQ(gemm_launch_geometry(f, cfg(128, 128, 128, 8, 8, 4, 4), GemmStage::up, 4096, 40000,
                                 "sm_90a").block.x, 256u);
  EXPECT_EQ(gemm_launch_geometry(f, w, GemmStage::down, 4096, 40000, "sm_90a").block.x, 256u);
  EXPECT_EQ(gemm_launch_geometry(f, w, GemmStage::up, 4096, 40000, "sm_89").block.x, 256u);
  EXPECT_EQ(gemm_launch_geometry(qwen_tp4(Dtype::fp8_w8a8, false), w, GemmStage::up, 4096, 40000,
                                 "sm_90a").block.x, 256u);
  // split-K workspace: counters (padded to 256 B) + partial tiles
  const std::size_t ws = gemm_workspace_bytes(s, c, GemmStage::up, 1);
  EXPECT_EQ(ws, 512u + 72u * 4 * 16 * 64 * 4);
  EXPECT_EQ(ws, gemm_workspace_bytes_for_grid(c, g.grid.x));
  EXPECT_EQ(gemm_counter_bytes_for_grid(c, g.grid.x), 512u);
  EXPECT_EQ(gemm_counter_bytes_for_grid(cfg(16, 64, 128, 1, 4, 4, 1), g.grid.x), 0u);
  EXPECT_EQ(gemm_workspace_bytes(s, cfg(16, 64, 128, 1, 4, 4, 1), GemmStage::up, 1), 0u);
}

// NVRTC compiles of representative instances (CPU only; skipped where NVRTC is absent).
class GemmNvrtc : public test_support::NvrtcTest {};

TEST_F(GemmNvrtc, CompilesRepresentativeInstancesForEachArch) {
  test_support::ScratchJit jit("gemm-test");
  struct Case {
    Dtype d;
    bool block;
    GemmStage st;
    KernelConfig c;
  };
  const Case bf16_cases[] = {
      {Dtype::bf16, false, GemmStage::up, cfg(16, 64, 128, 1, 4, 4, 4)},
      {Dtype::bf16, false, GemmStage::down, cfg(64, 128, 64, 8, 4, 3)},
      {Dtype::fp16, false, GemmStage::up, cfg(128, 256, 64, 16, 8, 3)},   // wgmma on sm_90a
      {Dtype::bf16, false, GemmStage::down, cfg(128, 128, 64, 16, 4, 4, 2)},  // wgmma on sm_90a
      // GEMM1 with SiLU(gate)·up fused (FUSED_ACT = 1):
      {Dtype::bf16, false, GemmStage::up_act, cfg(16, 64, 128, 1, 4, 4, 4)},     // split-K
      {Dtype::fp16, false, GemmStage::up_act, cfg(32, 128, 64, 1, 8, 5, 3)},     // mma, 8 warps
      {Dtype::bf16, false, GemmStage::up_act, cfg(128, 128, 64, 16, 8, 4)},      // wgmma on sm_90a
      {Dtype::fp16, false, GemmStage::up_act, cfg(64, 256, 64, 8, 4, 3, 2)},     // wgmma, split-K
  };
  const Case fp8_cases[] = {
      {Dtype::fp8_w8a8, true, GemmStage::up, cfg(16, 128, 128, 1, 4, 5, 2)},
      {Dtype::fp8_w8a8, true, GemmStage::down, cfg(64, 64, 128, 32, 4, 3)},
      {Dtype::fp8_w8a8, false, GemmStage::up, cfg(128, 128, 128, 8, 8, 3)},  // wgmma on sm_90a
      {Dtype::fp8_w8a8, true, GemmStage::up, cfg(64, 128, 128, 8, 4, 4, 2)},  // wgmma on sm_90a
  };
  for (const std::string arch : {"sm_80", "sm_89", "sm_90a", "sm_120"}) {
    std::vector<cuda::KernelSpec> specs;
    for (const auto& k : bf16_cases)
      specs.push_back(gemm_kernel_spec(qwen_tp4(k.d, k.block), k.c, k.st, arch));
    if (arch != "sm_80")
      for (const auto& k : fp8_cases)
        specs.push_back(gemm_kernel_spec(qwen_tp4(k.d, k.block), k.c, k.st, arch));
    const auto out = jit->compile_many(specs, 2);
    ASSERT_EQ(out.size(), specs.size());
    for (const auto& r : out) {
      EXPECT_FALSE(r.cubin.empty()) << arch << " " << r.spec.name << "\n" << r.log;
      EXPECT_FALSE(r.lowered_name.empty()) << r.spec.name;
    }
  }
}

// The PTX of the warp-specialized kernel carries the bound and the register split where
// tile_math applies them, and neither elsewhere (those compile as before); and ptxas honours
// them: every bounded instance of the tuner's space (m64n64 w4, 2-4 stages, SPLIT_K 1-2; GEMM1
// and, for a wide expert, GEMM2) compiles to the 80-register launch without spilling and without
// a setmaxnreg warning (C7508: "unable to determine register count at entry").
TEST_F(GemmNvrtc, WarpSpecializedKernelCarriesTheRegisterSplit) {
  const MoeShape f8 = qwen_tp4(Dtype::fp8_w8a8, true);
  const std::string ws = cuda::kernel_ptx(
      gemm_kernel_spec(f8, cfg(64, 64, 128, 8, 4, 4), GemmStage::up, "sm_90a"));
  EXPECT_NE(ws.find(".maxntid 256"), std::string::npos);
  EXPECT_NE(ws.find(".minnctapersm 3"), std::string::npos);
  EXPECT_NE(ws.find("setmaxnreg.dec.sync.aligned.u32 48"), std::string::npos);
  EXPECT_NE(ws.find("setmaxnreg.inc.sync.aligned.u32 112"), std::string::npos);
  const std::string wide = cuda::kernel_ptx(
      gemm_kernel_spec(f8, cfg(64, 128, 128, 8, 4, 4), GemmStage::up, "sm_90a"));
  EXPECT_NE(wide.find(".maxntid 256"), std::string::npos);  // warp-specialized too
  EXPECT_EQ(wide.find("minnctapersm"), std::string::npos);
  EXPECT_EQ(wide.find("setmaxnreg"), std::string::npos);

  test_support::ScratchJit jit("ws-test");
  std::vector<cuda::KernelSpec> specs;
  const MoeShape wide_expert = make_shape(8, 2048, 4096, 2, Dtype::fp8_w8a8, true);
  for (int st : {2, 3, 4})
    for (int sk : {1, 2}) specs.push_back(gemm_kernel_spec(f8, cfg(64, 64, 128, 8, 4, st, sk),
                                                           GemmStage::up, "sm_90a"));
  specs.push_back(gemm_kernel_spec(wide_expert, cfg(64, 64, 128, 8, 4, 4), GemmStage::down,
                                   "sm_90a"));
  for (auto& s : specs) s.options.push_back("--ptxas-options=-v");
  for (const auto& r : jit->compile_many(specs, 2)) {
    ASSERT_FALSE(r.cubin.empty()) << r.spec.name << "\n" << r.log;
    EXPECT_NE(r.log.find("Used 80 registers"), std::string::npos) << r.spec.name << "\n" << r.log;
    EXPECT_NE(r.log.find(" 0 bytes spill stores"), std::string::npos) << r.spec.name << "\n"
                                                                      << r.log;
    EXPECT_EQ(r.log.find("C7508"), std::string::npos) << r.spec.name << "\n" << r.log;
  }
}

// Swap-AB without the producer warpgroup (GEMM2's two K-tiles) is compiled for the blocks its
// shared memory holds, at most 8; GEMM1 (24 K-tiles: warp-specialized) keeps its own rule.
TEST(GemmTileRules, SwapAbMinBlocksFollowSharedMemoryAndRegisters) {
  auto fp8 = [](int bm, int bn, int w, int st) {
    return tm::gemm_swapab_min_blocks(tm::gemm_smem_bytes(bm, bn, 128, st, 1, 1, true), 32 * w,
                                      bm * bn / (32 * w), bm, true);
  };
  EXPECT_EQ(fp8(16, 128, 4, 2), 6);  // shared memory: 6 (80 registers >= 16 x 2 + 16 + 32)
  EXPECT_EQ(fp8(16, 128, 4, 3), 4);
  EXPECT_EQ(fp8(16, 64, 4, 2), 8);   // 64 registers >= 8 x 2 + 16 + 32
  EXPECT_EQ(fp8(32, 64, 4, 2), 5);   // shared memory holds 8; 96 registers need 5
  EXPECT_EQ(fp8(16, 128, 8, 2), 4);  // 256 threads: 64 registers at 4 blocks, 40 at 6
  EXPECT_EQ(tm::gemm_swapab_min_blocks(200 * 1024, 128, 16, 16, true), 0);  // one block
}
TEST_F(GemmNvrtc, SwapAbGemm2IsBoundToItsSharedMemoryBlocks) {
  const MoeShape f8 = qwen_tp4(Dtype::fp8_w8a8, true);
  const KernelConfig c = testing::swapped(cfg(16, 128, 128, 1, 4, 2));
  const std::string down = cuda::kernel_ptx(gemm_kernel_spec(f8, c, GemmStage::down, "sm_90a"));
  EXPECT_NE(down.find(".maxntid 128"), std::string::npos);
  EXPECT_NE(down.find(".minnctapersm 6"), std::string::npos);
  const std::string up = cuda::kernel_ptx(gemm_kernel_spec(f8, c, GemmStage::up, "sm_90a"));
  EXPECT_NE(up.find(".maxntid 256"), std::string::npos);  // the producer warpgroup
  EXPECT_EQ(up.find("minnctapersm 6"), std::string::npos);
}

// Swap-AB instances compile for sm_90a without spilling: block fp8 GEMM1 (warp-specialized,
// K = 3072) and GEMM2, one and two warpgroups, m16 and m32, split-K; 16-bit fused and not.
TEST_F(GemmNvrtc, SwapAbInstancesCompileWithoutSpills) {
  test_support::ScratchJit jit("swap-test");
  const MoeShape f8 = qwen_tp4(Dtype::fp8_w8a8, true), b16 = qwen_tp4(Dtype::bf16, false);
  using testing::swapped;
  std::vector<cuda::KernelSpec> specs;
  for (GemmStage st : {GemmStage::up, GemmStage::down}) {
    for (const KernelConfig& c : {swapped(cfg(16, 128, 128, 1, 4, 3)),
                                  swapped(cfg(32, 256, 128, 1, 8, 4)),
                                  swapped(cfg(16, 64, 128, 1, 4, 2, 2))})
      specs.push_back(gemm_kernel_spec(f8, c, st, "sm_90a"));
  }
  for (GemmStage st : {GemmStage::up_act, GemmStage::down})
    specs.push_back(gemm_kernel_spec(b16, swapped(cfg(16, 128, 64, 1, 4, 4)), st, "sm_90a"));
  for (auto& s : specs) s.options.push_back("--ptxas-options=-v");
  for (const auto& r : jit->compile_many(specs, 2)) {
    ASSERT_FALSE(r.cubin.empty()) << r.spec.name << "\n" << r.log;
    EXPECT_NE(r.log.find(" 0 bytes spill stores"), std::string::npos) << r.spec.name << "\n"
                                                                      << r.log;
  }
}

}  // namespace
}  // namespace moetune::gemm
