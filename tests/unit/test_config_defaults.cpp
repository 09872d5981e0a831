#include <algorithm>

#include <gtest/gtest.h>

#include "moetune/config.hpp"
#include "test_config_gpus.hpp"

namespace moetune {
namespace {

using test::gpu;

MoeShape shape(int E_global, int ep, int N, int K, int topk, Dtype dtype,
               std::optional<std::array<int, 2>> block_shape) {
  MoeShape s;
  s.E_global = E_global;
  s.E = E_global / ep;
  s.ep = ep;
  s.N = N;
  s.K = K;
  s.topk = topk;
  s.dtype = dtype;
  s.block_shape = block_shape;
  return s;
}

const std::array<int, 2> kBlock128 = {128, 128};

TEST(ConfigDefaults, BatchSizes) {
  EXPECT_EQ(default_batch_sizes(), (std::vector<int>{1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256,
                                                     512, 1024, 1536, 2048, 3072, 4096}));
}

TEST(ConfigDefaults, SglangFp8BlockWiseFollowsTheBlock) {
  const MoeShape s = shape(256, 1, 256, 3072, 8, Dtype::fp8_w8a8, kBlock128);
  for (int M : {1, 256, 257, 4096}) {
    EXPECT_EQ(sglang_default_config(s, M), (KernelConfig{64, 128, 128, 32, 4, 3, 1})) << M;
  }
  const MoeShape odd = shape(256, 1, 256, 3072, 8, Dtype::fp8_w8a8, std::array{64, 256});
  EXPECT_EQ(sglang_default_config(odd, 8), (KernelConfig{64, 64, 256, 32, 4, 3, 1}));
}

TEST(ConfigDefaults, SglangFp8PerTensorSwitchesAboveE) {
  const MoeShape s = shape(60, 1, 704, 2048, 4, Dtype::fp8_w8a8, std::nullopt);
  EXPECT_EQ(sglang_default_config(s, 60), (KernelConfig{64, 128, 128, 1, 4, 4, 1}));
  EXPECT_EQ(sglang_default_config(s, 61), (KernelConfig{128, 256, 128, 32, 8, 4, 1}));
}

TEST(ConfigDefaults, SglangSixteenBitSwitchesAboveE) {
  for (Dtype d : {Dtype::bf16, Dtype::fp16}) {
    // E on this rank decides: 256 experts over EP 8 is 32.
    const MoeShape s = shape(256, 8, 256, 7168, 8, d, std::nullopt);
    EXPECT_EQ(sglang_default_config(s, 1), (KernelConfig{16, 32, 64, 1, 4, 3, 1}));
    EXPECT_EQ(sglang_default_config(s, 32), (KernelConfig{16, 32, 64, 1, 4, 3, 1}));
    EXPECT_EQ(sglang_default_config(s, 33), (KernelConfig{64, 64, 32, 8, 4, 3, 1}));
  }
}

// Qwen3.5-122B-A10B fp8 at TP4 on an H200, one token: 8 experts active, each with one slot,
// 512 up columns. Small tiles, 64 wide so 64 blocks run, and the K=3072 reduction split in two
// so that 128 blocks cover the 132 SMs' half at least.
TEST(ConfigDefaults, MoetuneDecodeUsesSmallTilesAndSplitK) {
  const MoeShape s = shape(256, 1, 256, 3072, 8, Dtype::fp8_w8a8, kBlock128);
  const KernelConfig up = moetune_default_config(s, gpu(test::kH200), 1);
  EXPECT_EQ(up, (KernelConfig{16, 64, 128, 1, 4, 4, 2}));
  // Down: 3072 columns already give 8 * 24 = 192 tiles of 128: no split, full width.
  const KernelConfig down = moetune_default_config(s, gpu(test::kH200), 1, true);
  EXPECT_EQ(down, (KernelConfig{16, 128, 128, 1, 4, 4, 1}));
}

TEST(ConfigDefaults, MoetunePrefillUsesBigTiles) {
  const MoeShape s = shape(256, 1, 256, 3072, 8, Dtype::fp8_w8a8, kBlock128);
  const KernelConfig c = moetune_default_config(s, gpu(test::kH200), 4096);
  EXPECT_EQ(c.BLOCK_SIZE_M, 128);  // 128 slots per expert
  EXPECT_EQ(c.BLOCK_SIZE_N, 128);
  EXPECT_EQ(c.num_warps, 8);
  EXPECT_EQ(c.SPLIT_K, 1);
  const MoeShape bf16 = shape(256, 1, 256, 3072, 8, Dtype::bf16, std::nullopt);
  EXPECT_EQ(moetune_default_config(bf16, gpu(test::kH200), 4096).BLOCK_SIZE_K, 64);
}

TEST(ConfigDefaults, MoetuneShrinksToFitSmallSharedMemory) {
  // bf16 128x128x64 with 3 stages needs 98,816 B: fits the RTX PRO 6000's 101,376 B as is.
  const MoeShape s = shape(8, 1, 7168, 4096, 2, Dtype::bf16, std::nullopt);
  const GpuSpec& pro = gpu(test::kRtxPro6000);
  const KernelConfig c = moetune_default_config(s, pro, 4096);
  EXPECT_EQ(c.BLOCK_SIZE_M, 128);
  EXPECT_LE(moetune_smem_bytes(c, {Dtype::bf16, std::nullopt, &pro}), pro.smem_per_block_bytes);
  // A GPU with less shared memory gets fewer stages, then narrower tiles, never another BM.
  GpuSpec small = pro;
  small.smem_per_block_bytes = 48 * 1024;
  const KernelConfig shrunk = moetune_default_config(s, small, 4096);
  EXPECT_EQ(shrunk.BLOCK_SIZE_M, 128);
  EXPECT_EQ(shrunk.num_stages, 2);
  EXPECT_EQ(shrunk.BLOCK_SIZE_N, 32);
  EXPECT_TRUE(validate_config(shrunk, {Dtype::bf16, std::nullopt, &small}, 4096).empty());
}

// Every default must pass validation, and up and down share BLOCK_SIZE_M (one alignment).
TEST(ConfigDefaults, MoetuneDefaultsAreValidEverywhere) {
  struct Model {
    int E_global, ep, N, K, topk;
  };
  const std::vector<Model> models = {
      {256, 1, 256, 3072, 8},   // Qwen3.5-122B-A10B at TP4
      {256, 1, 256, 7168, 8},   // DeepSeek-V3 at TP8
      {8, 1, 7168, 4096, 2},    // Mixtral 8x7B at TP2
      {128, 8, 1536, 4096, 8},  // Qwen3-235B at EP8
      {60, 1, 704, 2048, 4},    // Qwen1.5-MoE at TP2
      {512, 1, 128, 2048, 10},  // Qwen3-Next at TP4
  };
  struct Precision {
    Dtype dtype;
    std::optional<std::array<int, 2>> block_shape;
  };
  const std::vector<Precision> precisions = {{Dtype::bf16, std::nullopt},
                                             {Dtype::fp16, std::nullopt},
                                             {Dtype::fp8_w8a8, kBlock128},
                                             {Dtype::fp8_w8a8, std::nullopt}};
  int checked = 0;
  for (const char* name : {test::kH200, test::kRtxPro6000}) {
    const GpuSpec& g = gpu(name);
    for (const Model& m : models) {
      for (const Precision& p : precisions) {
        const MoeShape s = shape(m.E_global, m.ep, m.N, m.K, m.topk, p.dtype, p.block_shape);
        const ValidationTarget target{p.dtype, p.block_shape, &g};
        for (int M : default_batch_sizes()) {
          const KernelConfig up = moetune_default_config(s, g, M, false);
          const KernelConfig down = moetune_default_config(s, g, M, true);
          EXPECT_TRUE(validate_config(up, target, M).empty()) << name << " M=" << M;
          EXPECT_TRUE(validate_config(down, target, M).empty()) << name << " M=" << M;
          EXPECT_EQ(up.BLOCK_SIZE_M, down.BLOCK_SIZE_M) << name << " M=" << M;
          // A split reduction (K up, N down) gives each split the same whole K-tiles.
          if (up.SPLIT_K > 1) {
            EXPECT_EQ(m.K % (up.SPLIT_K * up.BLOCK_SIZE_K), 0) << M;
          }
          if (down.SPLIT_K > 1) {
            EXPECT_EQ(m.N % (down.SPLIT_K * down.BLOCK_SIZE_K), 0) << M;
          }
          EXPECT_LE(down.BLOCK_SIZE_K, std::max(m.N, 64 / weight_bytes(p.dtype))) << M;
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, 2 * 6 * 4 * 18);
}

TEST(ConfigDefaults, MoetuneKTileNoDeeperThanTheReduction) {
  // Down reduces over N = 64: a 64-deep K-tile, no split below one tile per split.
  const MoeShape bf16 = shape(64, 1, 64, 2048, 8, Dtype::bf16, std::nullopt);
  const KernelConfig down = moetune_default_config(bf16, gpu(test::kH200), 1, true);
  EXPECT_EQ(down.BLOCK_SIZE_K, 64);
  EXPECT_EQ(down.SPLIT_K, 1);
  // N = 32: bf16 goes to 32; fp8 stops at 64, its shortest row (64 bytes).
  const MoeShape narrow = shape(64, 1, 32, 2048, 8, Dtype::bf16, std::nullopt);
  EXPECT_EQ(moetune_default_config(narrow, gpu(test::kH200), 1, true).BLOCK_SIZE_K, 32);
  const MoeShape fp8 = shape(64, 1, 32, 2048, 8, Dtype::fp8_w8a8, std::nullopt);
  EXPECT_EQ(moetune_default_config(fp8, gpu(test::kH200), 1, true).BLOCK_SIZE_K, 64);
}

TEST(ConfigDefaults, MoetuneBlockMGrowsWithTokensPerExpert) {
  const MoeShape s = shape(256, 1, 256, 3072, 8, Dtype::bf16, std::nullopt);
  int previous = 0;
  for (int M : default_batch_sizes()) {
    const int bm = moetune_default_config(s, gpu(test::kH200), M).BLOCK_SIZE_M;
    EXPECT_GE(bm, previous) << M;
    previous = bm;
  }
  EXPECT_EQ(moetune_default_config(s, gpu(test::kH200), 1).BLOCK_SIZE_M, 16);
  EXPECT_EQ(moetune_default_config(s, gpu(test::kH200), 4096).BLOCK_SIZE_M, 128);
}

}  // namespace
}  // namespace moetune
