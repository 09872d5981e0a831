#include <algorithm>

#include <gtest/gtest.h>

#include "kernels/common/tile_math.cuh"
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

// moetune_default_config follows the H200 measurements (bench/results/2026-11-30_h200_gemm.md);
// the values below are the rules applied by hand (spe = M * topk / E_global slots per expert).
KernelConfig up_at(const MoeShape& s, int M) {
  return moetune_default_config(s, gpu(test::kH200), M, false);
}
KernelConfig down_at(const MoeShape& s, int M) {
  return moetune_default_config(s, gpu(test::kH200), M, true);
}

const MoeShape kQwenBf16 = shape(256, 1, 256, 3072, 8, Dtype::bf16, std::nullopt);
const MoeShape kQwenFp8 = shape(256, 1, 256, 3072, 8, Dtype::fp8_w8a8, kBlock128);
const MoeShape kDsv3Fp8 = shape(256, 1, 256, 7168, 8, Dtype::fp8_w8a8, kBlock128);

// One token, Qwen3.5-122B-A10B at TP4: 8 active experts x 512/64 up columns = 64 tiles. bf16:
// SPLIT_K 4 (256 blocks <= 2 x 132 SMs; 6 K-tiles per split), the measured best. fp8: the budget
// doubles (4 x 132), SPLIT_K 8 (512 blocks; 3 K-tiles of 128 per split) with 3 stages, the
// measured best on both fp8 shapes. Down never splits: n64 k64 s5 (bf16 too: its 384 blocks of
// 51.3 KB fit 132 SMs x 4 at once).
TEST(ConfigDefaults, MoetuneDecodeUsesSmallTilesAndSplitK) {
  EXPECT_EQ(up_at(kQwenBf16, 1), (KernelConfig{16, 64, 128, 1, 4, 4, 4}));
  EXPECT_EQ(down_at(kQwenBf16, 1), (KernelConfig{16, 64, 64, 1, 4, 5, 1}));
  EXPECT_EQ(up_at(kQwenFp8, 1), (KernelConfig{16, 64, 128, 1, 4, 3, 8}));
  EXPECT_EQ(down_at(kQwenFp8, 1), (KernelConfig{16, 64, 64, 1, 4, 5, 1}));
  EXPECT_EQ(up_at(kDsv3Fp8, 1), (KernelConfig{16, 64, 128, 1, 4, 3, 8}));
  EXPECT_EQ(down_at(kDsv3Fp8, 1), (KernelConfig{16, 64, 64, 1, 4, 5, 1}));
}

// M = 8..256 (spe 0.25..8): still m16, no split (M=8: ~57 active experts x 8 N-tiles = 459
// blocks, over both budgets), up n64 k128 s4, down k64: 16-bit n64 s3 (more blocks than 4 per
// SM, so the ring shrinks to fit 32 KB); block fp8 n64 s5 below one slot per expert (M < 32 at
// topk 8 of 256), n128 s3 from it on (sm_90a) — where block fp8 on sm_90a does not swap A and
// B, which it does (SWAP_AB 1: m16 n128 k128, up s3, down s2) at spe 0.25..8 (M = 8..256 here),
// its up tile n256 (GEMM1 then writes the quantized activation) outside spe [0.375, 1)
// (M = 12..31 here), at 2 stages where that grid fits one wave only so (M = 23..46, below).
// bf16 up at M = 16 is the one-wave k64 s3 tile (MoetuneSixteenBitUpTakesOneWave), from M = 80
// n256 w8 s3 (MoetuneSixteenBitUpW8FromSpe2p5); bf16 down is swap-AB n128 k64 s2
// (MoetuneSwapAbOnlyOnSm90aBlockFp8And16BitDown).
TEST(ConfigDefaults, MoetuneDecodeWithoutSplitAboveFewTokens) {
  const KernelConfig swap_up{16, 128, 128, 1, 4, 3, 1, 1}, swap_down{16, 128, 128, 1, 4, 2, 1, 1},
      swap_up256{16, 256, 128, 1, 4, 3, 1, 1}, swap_up256_s2{16, 256, 128, 1, 4, 2, 1, 1};
  for (const MoeShape* s : {&kQwenBf16, &kQwenFp8, &kDsv3Fp8}) {
    const bool fp8 = s->dtype == Dtype::fp8_w8a8;  // block fp8: swap-AB at every M here
    for (int M : {16, 31, 32, 63, 64, 127, 128, 256}) {
      const KernelConfig up = !fp8 ? (M >= 80 ? KernelConfig{16, 256, 128, 1, 8, 3, 1}
                                              : KernelConfig{16, 64, M <= 17 ? 64 : 128, 1, 4,
                                                             M <= 17 ? 3 : 4, 1})
                              : M < 23 ? swap_up
                              : M <= 46 ? swap_up256_s2
                                        : swap_up256;
      KernelConfig down = fp8 ? swap_down : KernelConfig{16, 128, 64, 1, 4, 2, 1, 1};
      if (fp8 && M >= 128) down.GROUP_SIZE_M = 32;  // from 4 slots per expert (M * 8 / 256)
      EXPECT_EQ(up_at(*s, M), up) << M;
      EXPECT_EQ(down_at(*s, M), down) << M;
    }
  }
  // Block fp8 whose block_k is not a multiple of 128 keeps the unswapped decode tiles: n64 s5
  // below one slot per expert, n128 s3 from it on.
  const MoeShape bk64 = shape(256, 1, 256, 3072, 8, Dtype::fp8_w8a8, std::array{128, 64});
  EXPECT_EQ(down_at(bk64, 16), (KernelConfig{16, 64, 64, 1, 4, 5, 1}));
  EXPECT_EQ(down_at(bk64, 64), (KernelConfig{16, 128, 64, 1, 4, 3, 1}));
  EXPECT_EQ(up_at(bk64, 64).SWAP_AB, 0);
  // Not below 1/16 slot per expert (M = 1: the split-K tiles), nor past spe 8.
  EXPECT_EQ(up_at(kQwenFp8, 1).SWAP_AB, 0);
  EXPECT_EQ(up_at(kQwenFp8, 257).SWAP_AB, 0);
}

// The H100 SXM's block-fp8 decode rules (measured there, twenty-eighth and twenty-ninth
// sessions): GEMM2 keeps GROUP_SIZE_M 1 from 4 slots per expert (M = 128 here), where the H200
// takes 32; the fused n256 up tile takes 5 stages from 3 slots per expert (M = 96 here; M = 95 is
// 2.97), where the H200 keeps 3; and the fused-activation band ends at 0.5 slots per expert.
// Elsewhere, and in bf16, both boards get the same tiles.
TEST(ConfigDefaults, MoetuneH100SxmBlockFp8DecodeRules) {
  const GpuSpec& h100 = gpu("NVIDIA H100 80GB HBM3");
  const KernelConfig up_s3{16, 256, 128, 1, 4, 3, 1, 1}, up_s5{16, 256, 128, 1, 4, 5, 1, 1},
      up_s4{16, 256, 128, 1, 4, 4, 1, 1}, down_g1{16, 128, 128, 1, 4, 2, 1, 1};
  for (const MoeShape* s : {&kQwenFp8, &kDsv3Fp8}) {
    for (int M : {96, 128, 192, 256}) {
      EXPECT_EQ(moetune_default_config(*s, h100, M, false), up_s5) << M;
      EXPECT_EQ(up_at(*s, M), up_s3) << M;
    }
    for (int M : {128, 192, 256}) {
      EXPECT_EQ(moetune_default_config(*s, h100, M, true), down_g1) << M;
      EXPECT_EQ(down_at(*s, M).GROUP_SIZE_M, 32) << M;
    }
    for (int M : {1, 8, 12, 15, 23, 32, 48, 64, 95}) {
      EXPECT_EQ(moetune_default_config(*s, h100, M, false), up_at(*s, M)) << M;
      EXPECT_EQ(moetune_default_config(*s, h100, M, true), down_at(*s, M)) << M;
    }
    // The fused-activation band ends at 0.5 slots per expert (M = 16): M = 16..22 take the fused
    // n256 tile at 4 stages where the H200 keeps n128 and the activation stage; M = 12..15 keep
    // n128 on both; from M = 23 the one-wave s2 rule takes the fused tile on both.
    for (int M : {16, 20, 22}) {
      EXPECT_EQ(moetune_default_config(*s, h100, M, false), up_s4) << M;
      EXPECT_EQ(up_at(*s, M).BLOCK_SIZE_N, 128) << M;
      EXPECT_EQ(moetune_default_config(*s, h100, M, true), down_at(*s, M)) << M;
    }
    for (int M : {12, 15}) EXPECT_EQ(up_at(*s, M).BLOCK_SIZE_N, 128) << M;
    EXPECT_EQ(up_at(*s, 23).num_stages, 2);
  }
  for (int M : {96, 128, 256}) {
    EXPECT_EQ(moetune_default_config(kQwenBf16, h100, M, false), up_at(kQwenBf16, M)) << M;
    EXPECT_EQ(moetune_default_config(kQwenBf16, h100, M, true), down_at(kQwenBf16, M)) << M;
  }
  // Past 8 slots per expert (M = 257) the decode band and both rules end.
  EXPECT_EQ(moetune_default_config(kQwenFp8, h100, 257, true), down_at(kQwenFp8, 257));
  EXPECT_EQ(moetune_default_config(kQwenFp8, h100, 257, false), up_at(kQwenFp8, 257));
}

// 16-bit up in one wave of a shallower ring: Qwen3.5 bf16 has 256 x (1 - (31/32)^M) expected
// active experts, 8 up tiles each (512/64 columns), with a spare of one standard deviation,
// 8 x sqrt(256 p (1 - p)), p = active / 256. M = 4: 244 tiles, within 2 x 132 resident k128 s4
// blocks: k128 s4 stays. Resident: k64 s5 4 x 132 = 528, k128 s2 660, k64 s3 924. Below 3
// blocks per SM (396 tiles) k64 s5: M = 5 (300 + 45), 6 (355 + 49). M = 7 (408 + 51) .. 10
// (558 + 57 <= 660): k128 s2. M = 11: 604 + 58 = 662 > 660: k64 s3, up to M = 17 (854 + 63 =
// 917); M = 18: 891 + 64 > 924, no ring holds it: k128 s4. Only on sm_90a, where it was
// measured: the A100 keeps k128 s4.
TEST(ConfigDefaults, MoetuneSixteenBitUpTakesOneWave) {
  const KernelConfig k128{16, 64, 128, 1, 4, 4, 1}, k128_s2{16, 64, 128, 1, 4, 2, 1},
      k64_s5{16, 64, 64, 1, 4, 5, 1}, k64_s3{16, 64, 64, 1, 4, 3, 1};
  EXPECT_EQ(up_at(kQwenBf16, 4), k128);
  for (int M : {5, 6}) EXPECT_EQ(up_at(kQwenBf16, M), k64_s5) << M;
  for (int M : {7, 8, 9, 10}) EXPECT_EQ(up_at(kQwenBf16, M), k128_s2) << M;
  for (int M : {11, 12, 16, 17}) EXPECT_EQ(up_at(kQwenBf16, M), k64_s3) << M;
  EXPECT_EQ(up_at(kQwenBf16, 18), k128);
  EXPECT_EQ(up_at(kQwenBf16, 32), k128);
  for (int M : {5, 8, 12})
    EXPECT_EQ(moetune_default_config(kQwenBf16, gpu(test::kA100), M, false), k128) << M;
  // fp8 keeps its own tiles (swap-AB here).
  EXPECT_EQ(up_at(kQwenFp8, 8).SWAP_AB, 1);
  EXPECT_EQ(up_at(kQwenFp8, 12).BLOCK_SIZE_K, 128);
}

// 16-bit up from 2.5 token slots per expert to spe 8 (M = 80..256 at topk 8 of 256): m16 n256
// k128 w8 s3, measured at 2N = 512 columns (N = 256) on sm_90a only. M = 79 (spe 2.47) and
// M = 257 (past decode) keep their tiles; so do another N, fp8, the A100, and GEMM2.
TEST(ConfigDefaults, MoetuneSixteenBitUpW8FromSpe2p5) {
  const KernelConfig w8{16, 256, 128, 1, 8, 3, 1};
  const MoeShape ds_bf16 = shape(256, 1, 256, 7168, 8, Dtype::bf16, std::nullopt);
  for (const MoeShape* s : {&kQwenBf16, &ds_bf16}) {
    for (int M : {80, 96, 128, 200, 256}) EXPECT_EQ(up_at(*s, M), w8) << M;
    EXPECT_EQ(up_at(*s, 79), (KernelConfig{16, 64, 128, 1, 4, 4, 1}));
    EXPECT_NE(up_at(*s, 257), w8);
    EXPECT_EQ(down_at(*s, 128).BLOCK_SIZE_N, 128);  // GEMM2 keeps its swap-AB tile
  }
  const MoeShape n512 = shape(256, 1, 512, 3072, 8, Dtype::bf16, std::nullopt);
  EXPECT_NE(up_at(n512, 128), w8);
  EXPECT_NE(up_at(kQwenFp8, 128).num_warps, 8);
  // sm_90a only: an H100 takes it, an H200 compiled for plain sm_90 (no wgmma build) does not.
  EXPECT_EQ(moetune_default_config(kQwenBf16, gpu("NVIDIA H100 80GB HBM3"), 128, false), w8);
  EXPECT_NE(moetune_default_config(kQwenBf16, gpu_for_arch(gpu(test::kH200), "sm_90"), 128, false),
            w8);
  const MoeShape f16 = shape(256, 1, 256, 3072, 8, Dtype::fp16, std::nullopt);
  EXPECT_EQ(up_at(f16, 128), w8);  // same element width as bf16 (measured: call 5)
}

// The fused n256 up tile takes 2 stages (3 blocks per SM by shared memory) instead of 3 (2 per
// SM) where its grid, 2 blocks per expected active expert, outgrows one wave at 3 stages (264
// blocks on the H200's 132 SMs) but fits one at 2 (396): at topk 8 of 256 that is
// 512 x (1 - (31/32)^M) in (264, 396], M = 23..46 (M = 22: 257 blocks, 23: 265, 46: 393,
// 47: 397). Below, in the band spe [0.375, 1), the n128 tile and the activation stage stay
// (M = 12..22).
TEST(ConfigDefaults, MoetuneBlockFp8UpTakesOneWaveAtTwoStages) {
  const KernelConfig n128{16, 128, 128, 1, 4, 3, 1, 1}, n256_s3{16, 256, 128, 1, 4, 3, 1, 1},
      n256_s2{16, 256, 128, 1, 4, 2, 1, 1};
  for (const MoeShape* s : {&kQwenFp8, &kDsv3Fp8}) {
    for (int M : {12, 20, 22}) EXPECT_EQ(up_at(*s, M), n128) << M;
    for (int M : {23, 24, 28, 40, 46}) EXPECT_EQ(up_at(*s, M), n256_s2) << M;
    for (int M : {8, 11, 47, 48, 64}) EXPECT_EQ(up_at(*s, M), n256_s3) << M;
    for (int M : {24, 40}) EXPECT_EQ(down_at(*s, M), (KernelConfig{16, 128, 128, 1, 4, 2, 1, 1}));
  }
  // Twice the SMs: the s3 grid fits one wave up to 528 blocks, past any M here (512 at most).
  GpuSpec big = gpu(test::kH200);
  big.sm_count = 264;
  EXPECT_EQ(moetune_default_config(kQwenFp8, big, 40, false).num_stages, 3);
  EXPECT_EQ(moetune_default_config(kQwenFp8, big, 24, false).BLOCK_SIZE_N, 128);  // the band
  // An intermediate size that is not a multiple of 128 cannot fuse: the n128 s3 tile, never
  // n256 s2.
  const MoeShape narrow = shape(256, 1, 192, 3072, 8, Dtype::fp8_w8a8, kBlock128);
  EXPECT_EQ(up_at(narrow, 32), n128);
}

// Block fp8 swaps from spe 1/16 (M = 2 at topk 8 of 256), with the n256 up tile (below spe
// 0.375). Its up GEMM splits in two while its tiles fill less than 3/4 of the SMs: M = 2 has
// 15.75 expected active experts x 512/256 up columns = 31.5 tiles, M = 6 88, both below
// 0.75 x 132 = 99; M = 7 has 100.6. Down never splits.
TEST(ConfigDefaults, MoetuneBlockFp8SwapsFromTwoTokens) {
  const KernelConfig swap_down{16, 128, 128, 1, 4, 2, 1, 1};
  for (const MoeShape* s : {&kQwenFp8, &kDsv3Fp8}) {
    for (int M : {2, 3, 4, 5, 6})
      EXPECT_EQ(up_at(*s, M), (KernelConfig{16, 256, 128, 1, 4, 3, 2, 1})) << M;
    EXPECT_EQ(up_at(*s, 7), (KernelConfig{16, 256, 128, 1, 4, 3, 1, 1}));
    for (int M : {2, 3, 4, 5, 6, 7}) EXPECT_EQ(down_at(*s, M), swap_down) << M;
  }
  // A reduction of fewer than six 128-deep K-tiles does not split: K = 512 is four.
  const MoeShape shallow = shape(256, 1, 256, 512, 8, Dtype::fp8_w8a8, kBlock128);
  EXPECT_EQ(up_at(shallow, 2).SWAP_AB, 1);
  EXPECT_EQ(up_at(shallow, 2).SPLIT_K, 1);
  // On twice the SMs (a bound of 198 tiles) the n256 tiles split up to M = 11 (151 tiles); at
  // M = 12 the up tile is n128 (spe 0.375: 320 tiles).
  GpuSpec big = gpu(test::kH200);
  big.sm_count = 264;
  EXPECT_EQ(moetune_default_config(kQwenFp8, big, 11, false).SPLIT_K, 2);
  EXPECT_EQ(moetune_default_config(kQwenFp8, big, 12, false).SPLIT_K, 1);
  EXPECT_EQ(moetune_default_config(kQwenFp8, big, 12, false).BLOCK_SIZE_N, 128);
  // An intermediate size that is not a multiple of 128 keeps the n128 up tile.
  const MoeShape narrow = shape(256, 1, 192, 3072, 8, Dtype::fp8_w8a8, kBlock128);
  EXPECT_NE(up_at(narrow, 8).BLOCK_SIZE_N, 256);
}

// Swap-AB runs on wgmma: the RTX PRO 6000 (sm_120) and per-tensor fp8 (not measured) keep the
// unswapped tiles at every decode size; 16-bit takes it for GEMM2 only, from M = 8 here (1/4
// slot per expert) and at N = 256: m16 n128 k64 w4 s2.
TEST(ConfigDefaults, MoetuneSwapAbOnlyOnSm90aBlockFp8And16BitDown) {
  const MoeShape tensor_fp8 = shape(256, 1, 256, 3072, 8, Dtype::fp8_w8a8, std::nullopt);
  const KernelConfig swap16{16, 128, 64, 1, 4, 2, 1, 1};
  for (int M : {8, 64, 256}) {
    EXPECT_EQ(moetune_default_config(kQwenFp8, gpu(test::kRtxPro6000), M, false).SWAP_AB, 0);
    EXPECT_EQ(moetune_default_config(kQwenFp8, gpu(test::kRtxPro6000), M, true).SWAP_AB, 0);
    EXPECT_EQ(moetune_default_config(kQwenBf16, gpu(test::kRtxPro6000), M, true).SWAP_AB, 0);
    EXPECT_EQ(moetune_default_config(kQwenBf16, gpu(test::kA100), M, true).SWAP_AB, 0);
    EXPECT_EQ(up_at(tensor_fp8, M).SWAP_AB, 0);
    EXPECT_EQ(up_at(kQwenBf16, M).SWAP_AB, 0);
    EXPECT_EQ(down_at(kQwenBf16, M), swap16) << M;
  }
  EXPECT_EQ(down_at(kQwenBf16, 7).SWAP_AB, 0);  // 7/32 slot per expert: not measured
  // Only the measured reduction (N = 256): Mixtral-8x7B at TP2 (N = 7168) and N = 512 keep
  // the unswapped tiles.
  const MoeShape mixtral = shape(8, 1, 7168, 4096, 2, Dtype::bf16, std::nullopt);
  const MoeShape n512 = shape(256, 1, 512, 3072, 8, Dtype::bf16, std::nullopt);
  for (int M : {1, 8, 32}) EXPECT_EQ(down_at(mixtral, M).SWAP_AB, 0) << M;
  EXPECT_EQ(down_at(n512, 64).SWAP_AB, 0);
  EXPECT_EQ(down_at(kQwenBf16, 257).SWAP_AB, 0);  // past spe 8: the middle band's m64 tiles
}

// The fp8 decode n128 rule holds where it was measured only: block fp8 on sm_90a. Per-tensor
// fp8 and the RTX PRO 6000 keep n64 s5 at M = 64.
TEST(ConfigDefaults, MoetuneFp8DecodeDownN128OnlyWhereMeasured) {
  const MoeShape tensor_fp8 = shape(256, 1, 256, 3072, 8, Dtype::fp8_w8a8, std::nullopt);
  EXPECT_EQ(down_at(tensor_fp8, 64), (KernelConfig{16, 64, 64, 1, 4, 5, 1}));
  EXPECT_EQ(moetune_default_config(kQwenFp8, gpu(test::kRtxPro6000), 64, true).BLOCK_SIZE_N, 64);
}

// Decode down's stage count follows its grid: at one token a bf16 GEMM2 with K = 3072 has
// 8 x 48 = 384 blocks, all resident at 5 stages (4 x 132); with K = 7168 it has 8 x 112 = 896,
// so the ring shrinks to 3 stages (30.8 KB, 7 per SM). On a GPU with 4x the SMs (2,112 resident
// at s5) 896 fit, and so do K = 3072's ~31 experts x 48 at M = 4 (~1,470; 528 on the H200).
TEST(ConfigDefaults, MoetuneDecodeDownStagesFollowTheGrid) {
  const MoeShape wide_bf16 = shape(256, 1, 256, 7168, 8, Dtype::bf16, std::nullopt);
  EXPECT_EQ(down_at(kQwenBf16, 1).num_stages, 5);
  EXPECT_EQ(down_at(wide_bf16, 1).num_stages, 3);
  GpuSpec big = gpu(test::kH200);
  big.sm_count *= 4;
  EXPECT_EQ(moetune_default_config(wide_bf16, big, 1, true).num_stages, 5);
  EXPECT_EQ(down_at(kQwenBf16, 4).num_stages, 3);
  EXPECT_EQ(moetune_default_config(kQwenBf16, big, 4, true).num_stages, 5);
}

// Block-fp8 GEMM2 above decode takes n64 s3 only where it was measured: sm_90a with a reduction
// (N) short of warp specialization (N = 256: 2 K-tiles). A wide expert (N = 1536 per rank: 12
// K-tiles, warp-specialized), per-tensor fp8 and the mma.sync GPUs keep n128 s4.
TEST(ConfigDefaults, MoetuneFp8DownN64OnlyWhereMeasured) {
  const KernelConfig n128{64, 128, 128, 8, 4, 4, 1};
  const MoeShape tensor_fp8 = shape(256, 1, 256, 3072, 8, Dtype::fp8_w8a8, std::nullopt);
  EXPECT_EQ(down_at(tensor_fp8, 1024), n128);
  EXPECT_EQ(down_at(tensor_fp8, 4096), n128);
  const MoeShape wide = shape(128, 1, 1536, 4096, 8, Dtype::fp8_w8a8, kBlock128);
  EXPECT_EQ(down_at(wide, 1024), n128);
  EXPECT_EQ(moetune_default_config(kQwenFp8, gpu(test::kRtxPro6000), 1024, true).BLOCK_SIZE_N, 128);
}

// fp16 follows bf16 (same element width); on the RTX PRO 6000 (99 KB + 1 KB per SM: one 51.3 KB
// block) even one token's 384 blocks outgrow the 188 resident at 5 stages.
TEST(ConfigDefaults, MoetuneDecodeDownStagesFp16AndSmallSmem) {
  const MoeShape fp16 = shape(256, 1, 256, 3072, 8, Dtype::fp16, std::nullopt);
  EXPECT_EQ(down_at(fp16, 1).num_stages, 5);
  EXPECT_EQ(down_at(fp16, 4).num_stages, 3);
  EXPECT_EQ(down_at(fp16, 8), (KernelConfig{16, 128, 64, 1, 4, 2, 1, 1}));  // swap-AB, as bf16
  EXPECT_EQ(moetune_default_config(kQwenBf16, gpu(test::kRtxPro6000), 1, true).num_stages, 3);
}

// spe 8 < x <= 64 (M=1024: 32): m64 n128 g8 w4 s4, k64 for 16-bit and k128 for fp8, both GEMMs,
// except fp8 up: n64, and block-fp8 down: n64 s3.
TEST(ConfigDefaults, MoetuneMiddleBand) {
  for (int M : {257, 1024, 2048}) {
    EXPECT_EQ(up_at(kQwenBf16, M), (KernelConfig{64, 128, 64, 8, 4, 4, 1})) << M;
    EXPECT_EQ(down_at(kQwenBf16, M), (KernelConfig{64, 128, 64, 8, 4, 4, 1})) << M;
    for (const MoeShape* s : {&kQwenFp8, &kDsv3Fp8}) {
      EXPECT_EQ(up_at(*s, M), (KernelConfig{64, 64, 128, 8, 4, 4, 1})) << M;
      EXPECT_EQ(down_at(*s, M), (KernelConfig{64, 64, 128, 8, 4, 3, 1})) << M;
    }
  }
}

// spe > 64 (M=4096: 128): bf16 m128 k64 g16 w8, up n128 s4, down n256 s3; block fp8 stays at
// m64 k128, on sm_90a with the tuner's M = 4096 picks (g16; up n256 w8 s4, down n128 w4 s3),
// elsewhere g8 w4, up n64 s4, down n128 s4.
TEST(ConfigDefaults, MoetunePrefillUsesBigTiles) {
  EXPECT_EQ(up_at(kQwenBf16, 4096), (KernelConfig{128, 128, 64, 16, 8, 4, 1}));
  EXPECT_EQ(down_at(kQwenBf16, 4096), (KernelConfig{128, 256, 64, 16, 8, 3, 1}));
  for (const MoeShape* s : {&kQwenFp8, &kDsv3Fp8}) {
    EXPECT_EQ(up_at(*s, 4096), (KernelConfig{64, 256, 128, 16, 8, 4, 1}));
    EXPECT_EQ(down_at(*s, 4096), (KernelConfig{64, 128, 128, 16, 4, 3, 1}));
    // The RTX PRO 6000 (sm_120) keeps the rules' tiles (nothing measured there).
    EXPECT_EQ(moetune_default_config(*s, gpu(test::kRtxPro6000), 4096, false),
              (KernelConfig{64, 64, 128, 8, 4, 4, 1}));
  }
}

// On sm_90a every default tile of >= 64 rows has 128-byte K rows: the wgmma kernel runs it.
TEST(ConfigDefaults, MoetuneBigTilesSelectWgmmaOnH200) {
  for (const MoeShape* s : {&kQwenBf16, &kQwenFp8, &kDsv3Fp8}) {
    const int bytes = weight_bytes(s->dtype);
    for (int M : default_batch_sizes()) {
      for (bool down : {false, true}) {
        const KernelConfig c = moetune_default_config(*s, gpu(test::kH200), M, down);
        if (c.BLOCK_SIZE_M < 64) continue;
        EXPECT_EQ(c.BLOCK_SIZE_K * bytes, 128) << M << (down ? " down" : " up");
        EXPECT_TRUE(tile_math::gemm_wgmma_eligible(c.BLOCK_SIZE_M, c.BLOCK_SIZE_N, c.BLOCK_SIZE_K,
                                                   c.num_warps, bytes, s->block_shape.has_value()))
            << M << (down ? " down" : " up");
      }
    }
  }
}

// A block shape with block_k 64 keeps K-tiles inside one scale group (k64, off the wgmma path).
TEST(ConfigDefaults, MoetuneKTileDividesBlockK) {
  const MoeShape s = shape(256, 1, 256, 3072, 8, Dtype::fp8_w8a8, std::array{128, 64});
  for (int M : default_batch_sizes()) {
    for (bool down : {false, true}) {
      const KernelConfig c = moetune_default_config(s, gpu(test::kH200), M, down);
      EXPECT_EQ(64 % c.BLOCK_SIZE_K, 0) << M;
      EXPECT_TRUE(validate_config(c, {s.dtype, s.block_shape, &gpu(test::kH200)}, M).empty()) << M;
    }
  }
}

TEST(ConfigDefaults, MoetuneShrinksToFitSmallSharedMemory) {
  // Mixtral bf16 at M=4096 (spe 1024) on the RTX PRO 6000 (101,376 B): up 128x128x64 with the
  // rule's 4 stages needs 131,600 B, so 3 (98,832 B); down 128x256x64 with 3 stages needs
  // 147,984 B, so 2 (98,832 B). Tiles stay; only stages go.
  const MoeShape s = shape(8, 1, 7168, 4096, 2, Dtype::bf16, std::nullopt);
  const GpuSpec& pro = gpu(test::kRtxPro6000);
  EXPECT_EQ(moetune_default_config(s, pro, 4096), (KernelConfig{128, 128, 64, 16, 8, 3, 1}));
  EXPECT_EQ(moetune_default_config(s, pro, 4096, true), (KernelConfig{128, 256, 64, 16, 8, 2, 1}));
  // A GPU with less shared memory gets fewer stages, then narrower tiles, never another BM.
  GpuSpec small = pro;
  small.smem_per_block_bytes = 48 * 1024;
  for (bool down : {false, true}) {
    const KernelConfig shrunk = moetune_default_config(s, small, 4096, down);
    EXPECT_EQ(shrunk.BLOCK_SIZE_M, 128);
    EXPECT_EQ(shrunk.num_stages, 2);
    EXPECT_EQ(shrunk.BLOCK_SIZE_N, 32);
    EXPECT_EQ(shrunk.BLOCK_SIZE_K, 64);
    EXPECT_TRUE(validate_config(shrunk, {Dtype::bf16, std::nullopt, &small}, 4096).empty());
  }
}

// Every default must pass validation on every GPU of the spec table that runs the dtype (fp8
// from sm_89), up and down share BLOCK_SIZE_M (one alignment), a block-fp8 K-tile divides block_k,
// and a split reduction gives every split the same whole, non-zero number of K-tiles.
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
  int gpus = 0;
  bool saw_h200 = false, saw_pro = false;
  for (const GpuSpec& g : gpu_specs()) {
    ++gpus;
    saw_h200 = saw_h200 || &g == &gpu(test::kH200);
    saw_pro = saw_pro || &g == &gpu(test::kRtxPro6000);
    const std::string name = g.name;
    for (const Model& m : models) {
      for (const Precision& p : precisions) {
        if (p.dtype == Dtype::fp8_w8a8 && g.compute_capability() < 89) continue;  // cannot run
        const MoeShape s = shape(m.E_global, m.ep, m.N, m.K, m.topk, p.dtype, p.block_shape);
        const ValidationTarget target{p.dtype, p.block_shape, &g};
        std::vector<int> Ms = default_batch_sizes();  // and every M FusedMoe's tables hold
        for (int M = 1; M <= 32; ++M) Ms.push_back(M);
        for (int M : Ms) {
          const KernelConfig up = moetune_default_config(s, g, M, false);
          const KernelConfig down = moetune_default_config(s, g, M, true);
          EXPECT_TRUE(validate_config(up, target, M).empty()) << name << " M=" << M;
          EXPECT_TRUE(validate_config(down, target, M).empty()) << name << " M=" << M;
          EXPECT_EQ(up.BLOCK_SIZE_M, down.BLOCK_SIZE_M) << name << " M=" << M;
          if (p.block_shape) {
            EXPECT_EQ((*p.block_shape)[1] % up.BLOCK_SIZE_K, 0) << name << " M=" << M;
            EXPECT_EQ((*p.block_shape)[1] % down.BLOCK_SIZE_K, 0) << name << " M=" << M;
          }
          // A split reduction (K up, N down) gives each split the same whole K-tiles, >= 1.
          if (up.SPLIT_K > 1) {
            EXPECT_EQ(m.K % (up.SPLIT_K * up.BLOCK_SIZE_K), 0) << name << " M=" << M;
            EXPECT_GE(m.K / (up.SPLIT_K * up.BLOCK_SIZE_K), 1) << name << " M=" << M;
          }
          if (down.SPLIT_K > 1) {
            EXPECT_EQ(m.N % (down.SPLIT_K * down.BLOCK_SIZE_K), 0) << name << " M=" << M;
          }
          EXPECT_LE(down.BLOCK_SIZE_K, std::max(m.N, 64 / weight_bytes(p.dtype))) << M;
          ++checked;
        }
      }
    }
  }
  EXPECT_TRUE(saw_h200 && saw_pro);
  EXPECT_GE(gpus, 2);
  EXPECT_GE(checked, 2 * 6 * 4 * 18);
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
