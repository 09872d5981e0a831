#include <algorithm>
#include <climits>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "moetune/config.hpp"
#include "test_config_gpus.hpp"

namespace moetune {
namespace {

using test::gpu;

const std::string kCases = std::string(MOETUNE_TEST_DATA) + "/cases/";
const std::array<int, 2> kBlock128 = {128, 128};

ValidationTarget fp8_block(const char* gpu_name, std::array<int, 2> block = kBlock128) {
  return {Dtype::fp8_w8a8, block, &gpu(gpu_name)};
}
ValidationTarget bf16(const char* gpu_name) { return {Dtype::bf16, std::nullopt, &gpu(gpu_name)}; }

// Valid everywhere below: 16x64x128 tiles, 3 stages.
const KernelConfig kValid{16, 64, 128, 1, 4, 3, 1};

std::vector<std::string> keys(const std::vector<Violation>& vs) {
  std::vector<std::string> out;
  for (const auto& v : vs) out.push_back(v.key);
  return out;
}

// Changes one key of kValid and expects exactly one violation, of that key.
void expect_only(KernelConfig c, const ValidationTarget& t, const std::string& key,
                 const std::string& value, const std::string& limit) {
  const auto vs = validate_config(c, t, 8);
  ASSERT_EQ(vs.size(), 1u) << ::testing::PrintToString(keys(vs));
  EXPECT_EQ(vs[0].M, 8);
  EXPECT_EQ(vs[0].key, key);
  EXPECT_EQ(vs[0].value, value);
  EXPECT_EQ(vs[0].limit, limit);
  EXPECT_FALSE(vs[0].rule.empty());
  EXPECT_FALSE(vs[0].down);
}

TEST(ConfigValidate, BaseConfigIsValid) {
  EXPECT_TRUE(validate_config(kValid, fp8_block(test::kH200), 8).empty());
  EXPECT_TRUE(validate_config(kValid, bf16(test::kRtxPro6000), 8).empty());
}

TEST(ConfigValidate, EachAllowedSetFiresAlone) {
  const ValidationTarget t = bf16(test::kH200);
  KernelConfig c = kValid;
  c.BLOCK_SIZE_M = 48;
  expect_only(c, t, "BLOCK_SIZE_M", "48", "{16, 32, 64, 128, 256}");
  c = kValid;
  c.BLOCK_SIZE_N = 96;
  expect_only(c, t, "BLOCK_SIZE_N", "96", "{32, 64, 128, 256}");
  c = kValid;
  c.BLOCK_SIZE_K = 16;
  expect_only(c, t, "BLOCK_SIZE_K", "16", "{32, 64, 128, 256}");
  c = kValid;
  c.GROUP_SIZE_M = 0;
  expect_only(c, t, "GROUP_SIZE_M", "0", ">= 1");
  c = kValid;
  c.num_warps = 16;
  expect_only(c, t, "num_warps", "16", "{4, 8}");
  c = kValid;
  c.num_stages = 1;
  expect_only(c, t, "num_stages", "1", "2..5");
  c.num_stages = 6;
  expect_only(c, t, "num_stages", "6", "2..5");
  c = kValid;
  c.SPLIT_K = 3;
  expect_only(c, t, "SPLIT_K", "3", "{1, 2, 4, 8}");
  c = kValid;
  c.SWAP_AB = 2;
  expect_only(c, t, "SWAP_AB", "2", "{0, 1}");
}

// Swap-AB runs on sm_90a's wgmma with 128-byte rows and 16/32 token rows; 16-bit tiles must pair
// a gate and an up slice per warpgroup (GEMM1 is fused at decode).
TEST(ConfigValidate, SwapAbWhereTheKernelRunsIt) {
  const KernelConfig ok{16, 128, 128, 1, 4, 3, 1, 1};
  EXPECT_TRUE(validate_config(ok, fp8_block(test::kH200), 8).empty());
  expect_only(ok, fp8_block(test::kRtxPro6000), "SWAP_AB", "1", "moetune's GEMM kernel");
  KernelConfig c = ok;
  c.BLOCK_SIZE_M = 64;
  expect_only(c, fp8_block(test::kH200), "SWAP_AB", "1", "moetune's GEMM kernel");
  c = ok;
  c.BLOCK_SIZE_K = 64;  // 64-byte fp8 rows
  expect_only(c, fp8_block(test::kH200), "SWAP_AB", "1", "moetune's GEMM kernel");
  c = ok;
  c.BLOCK_SIZE_K = 64;  // bf16: 128-byte rows, 128 weight rows per warpgroup
  EXPECT_TRUE(validate_config(c, bf16(test::kH200), 8).empty());
  c.BLOCK_SIZE_N = 64;  // 64 rows: no gate/up pair
  expect_only(c, bf16(test::kH200), "SWAP_AB", "1", "moetune's GEMM kernel");
}

TEST(ConfigValidate, ThreadsPerBlockOverTheCudaLimit) {
  KernelConfig c = kValid;
  c.num_warps = 64;  // 2048 threads: outside {4, 8} and over 1024
  const auto vs = validate_config(c, bf16(test::kH200), 8);
  ASSERT_EQ(vs.size(), 2u);
  EXPECT_EQ(vs[1].key, "num_warps");
  EXPECT_EQ(vs[1].limit, "32 (1024 threads)");
  EXPECT_NE(vs[1].rule.find("2048 threads"), std::string::npos) << vs[1].rule;
}

// moetune's kernel: num_stages x (A tile + B tile) + the slot table (BM int32) + 16 bytes.
TEST(ConfigValidate, SharedMemoryFiresAloneWithBothByteCounts) {
  const KernelConfig c{128, 256, 256, 1, 8, 5, 1};  // every key allowed, far too big
  const ValidationTarget t = bf16(test::kH200);
  EXPECT_EQ(moetune_smem_bytes(c, t), 5 * (128 * 256 * 2 + 256 * 256 * 2) + 128 * 4 + 16);
  EXPECT_EQ(reference_smem_bytes(c, t), 4 * 384 * 256 * 2);
  const auto vs = validate_config(c, t, 8);
  ASSERT_EQ(vs.size(), 1u);
  EXPECT_EQ(vs[0].key, "smem_bytes");
  EXPECT_EQ(vs[0].value, "983568");
  EXPECT_EQ(vs[0].limit, "232448");
  EXPECT_NE(vs[0].rule.find("786432 B"), std::string::npos) << vs[0].rule;
}

// 128x128x128 fp8, 4 stages on the RTX PRO 6000: the reference estimate (98,304 B) fits its
// 101,376 B, moetune's kernel (131,664 B with its mbarriers) does not. moetune's number decides.
TEST(ConfigValidate, MoetuneFormulaDecidesNotTheReference) {
  const KernelConfig c{128, 128, 128, 32, 8, 4, 1};
  const ValidationTarget t = fp8_block(test::kRtxPro6000);
  EXPECT_EQ(reference_smem_bytes(c, t), 98304);
  EXPECT_EQ(moetune_smem_bytes(c, t), 131600 + 4 * 16);
  EXPECT_EQ(keys(validate_config(c, t, 4096)), std::vector<std::string>{"smem_bytes"});
}

TEST(ConfigValidate, SharedMemoryCountsElementBytes) {
  const KernelConfig c{64, 128, 128, 1, 4, 3, 1};
  const GpuSpec& h200 = gpu(test::kH200);
  const int fp8 = 3 * (64 * 128 + 128 * 128) + 64 * 4 + 16;
  EXPECT_EQ(moetune_smem_bytes(c, {Dtype::fp8_w8a8, kBlock128, &h200}), fp8 + 3 * 16);  // mbarriers
  EXPECT_EQ(moetune_smem_bytes(c, {Dtype::fp8_w8a8, std::nullopt, &h200}), fp8);
  EXPECT_EQ(moetune_smem_bytes(c, {Dtype::bf16, std::nullopt, &h200}),
            3 * (64 * 128 * 2 + 128 * 128 * 2) + 64 * 4 + 16);
  EXPECT_EQ(reference_smem_bytes(c, {Dtype::bf16, std::nullopt, &h200}), 2 * 192 * 128 * 2);
}

// Within the allowed sets, the kernel's own rules (tile_math::tile_rule_violation) still apply.
TEST(ConfigValidate, KernelTileRulesFireAlone) {
  // 128x256 outputs over 4 warps: 256 fp32 accumulators per thread would spill.
  const KernelConfig spills{128, 256, 32, 1, 4, 2, 1};
  auto vs = validate_config(spills, bf16(test::kH200), 8);
  ASSERT_EQ(vs.size(), 1u) << ::testing::PrintToString(keys(vs));
  EXPECT_EQ(vs[0].key, "BLOCK_SIZE_M");
  EXPECT_EQ(vs[0].limit, "moetune's GEMM kernel");
  EXPECT_NE(vs[0].rule.find("accumulators"), std::string::npos) << vs[0].rule;
  // 16x32 over 4 warps: no warp grid gives each warp a 16x16 multiple.
  const KernelConfig no_grid{16, 32, 64, 1, 4, 3, 1};
  vs = validate_config(no_grid, bf16(test::kH200), 8);
  ASSERT_EQ(vs.size(), 1u) << ::testing::PrintToString(keys(vs));
  EXPECT_NE(vs[0].rule.find("warp tiling"), std::string::npos) << vs[0].rule;
  // fp8 rows of 32 bytes are too narrow for the swizzle; bf16 rows of 64 bytes are not.
  const KernelConfig narrow{16, 64, 32, 1, 4, 3, 1};
  EXPECT_TRUE(validate_config(narrow, bf16(test::kH200), 8).empty());
  vs = validate_config(narrow, {Dtype::fp8_w8a8, std::nullopt, &gpu(test::kH200)}, 8);
  ASSERT_EQ(vs.size(), 1u);
  EXPECT_EQ(vs[0].key, "BLOCK_SIZE_K");
  EXPECT_EQ(vs[0].value, "32");
  // A key outside its allowed set is reported once, not again by the kernel rules.
  KernelConfig bad_k = kValid;
  bad_k.BLOCK_SIZE_K = 16;
  EXPECT_EQ(keys(validate_config(bad_k, bf16(test::kH200), 8)),
            std::vector<std::string>{"BLOCK_SIZE_K"});
}

TEST(ConfigValidate, HugeTilesSaturateInsteadOfOverflowing) {
  KernelConfig c = kValid;
  c.BLOCK_SIZE_M = 1 << 28;
  const ValidationTarget t = bf16(test::kH200);
  EXPECT_EQ(moetune_smem_bytes(c, t), INT_MAX);
  EXPECT_EQ(reference_smem_bytes(c, t), INT_MAX);
  EXPECT_EQ(keys(validate_config(c, t, 8)),
            (std::vector<std::string>{"BLOCK_SIZE_M", "smem_bytes"}));
}

TEST(ConfigValidate, BlockKMustDivideTheScaleGroup) {
  KernelConfig c = kValid;
  c.BLOCK_SIZE_K = 256;
  expect_only(c, fp8_block(test::kH200), "BLOCK_SIZE_K", "256", "a divisor of block_k 128");
  // Per-tensor fp8 and 16-bit have no scale groups; a block shape without fp8 is ignored.
  EXPECT_TRUE(validate_config(c, {Dtype::fp8_w8a8, std::nullopt, &gpu(test::kH200)}, 8).empty());
  EXPECT_TRUE(validate_config(c, {Dtype::bf16, kBlock128, &gpu(test::kH200)}, 8).empty());
}

TEST(ConfigValidate, BlockNMustDivideOrCoverTheScaleBlock) {
  KernelConfig c = kValid;
  c.BLOCK_SIZE_N = 128;
  expect_only(c, fp8_block(test::kH200, {192, 128}), "BLOCK_SIZE_N", "128",
              "a divisor or multiple of block_n 192");
  c.BLOCK_SIZE_N = 64;  // divides 192
  EXPECT_TRUE(validate_config(c, fp8_block(test::kH200, {192, 128}), 8).empty());
  c.BLOCK_SIZE_N = 256;  // two whole 128 blocks
  EXPECT_TRUE(validate_config(c, fp8_block(test::kH200), 8).empty());
}

TEST(ConfigValidate, Fp8NeedsSm89) {
  const ValidationTarget a100{Dtype::fp8_w8a8, kBlock128, &gpu(test::kA100)};
  expect_only(kValid, a100, "dtype", "fp8_w8a8", "sm_89");
  EXPECT_TRUE(validate_config(kValid, bf16(test::kA100), 8).empty());
}

TEST(ConfigValidate, EachUnknownKeyIsOneViolation) {
  const auto vs = validate_config(kValid, bf16(test::kH200), 8, {"USE_TMA", "waves_per_eu"});
  ASSERT_EQ(vs.size(), 2u);
  EXPECT_EQ(vs[0].key, "USE_TMA");
  EXPECT_EQ(vs[1].key, "waves_per_eu");
  EXPECT_EQ(vs[0].rule, "unknown key");
  EXPECT_NE(vs[0].limit.find("SPLIT_K"), std::string::npos) << vs[0].limit;
}

TEST(ConfigValidate, CollectsEveryViolationOfAnEntry) {
  KernelConfig c = kValid;
  c.BLOCK_SIZE_M = 48;
  c.BLOCK_SIZE_K = 256;
  const ValidationTarget a100{Dtype::fp8_w8a8, kBlock128, &gpu(test::kA100)};
  EXPECT_EQ(keys(validate_config(c, a100, 8, {"foo"})),
            (std::vector<std::string>{"BLOCK_SIZE_M", "BLOCK_SIZE_K", "dtype", "foo"}));
}

TEST(ConfigValidate, MissingGpuIsACallerBug) {
  EXPECT_THROW(validate_config(kValid, {Dtype::bf16, std::nullopt, nullptr}, 8),
               std::invalid_argument);
}

// tests/data/cases/README.md
TEST(ConfigValidate, BadSmemCaseOnRtxPro6000) {
  const ParsedTable t = read_config_table(kCases + "config_bad_smem.json");
  const ValidationTarget target = fp8_block(test::kRtxPro6000);
  ASSERT_EQ(target.gpu->smem_per_block_bytes, 101376);
  const auto vs = validate_table(t, target);
  // Only the 4096 entry is rejected, and shared memory is among its reasons (its 128x256 tile
  // over 8 warps also breaks the kernel's block-fp8 accumulator rule).
  ASSERT_FALSE(vs.empty());
  for (const auto& v : vs) EXPECT_EQ(v.M, 4096) << v.key;
  const auto smem = std::find_if(vs.begin(), vs.end(),
                                 [](const Violation& v) { return v.key == "smem_bytes"; });
  ASSERT_NE(smem, vs.end());
  EXPECT_EQ(smem->value, "197200");  // 4 * (128*128 + 256*128) + 128*4 + 16 + 4 mbarrier pairs
  EXPECT_EQ(smem->limit, "101376");
  EXPECT_NE(smem->rule.find("147456 B"), std::string::npos) << smem->rule;  // 3*384*128
  EXPECT_EQ(moetune_smem_bytes(t.entries.at(1).config, target), 74000 + 3 * 16);
}

TEST(ConfigValidate, BadBlockKCase) {
  const ParsedTable t = read_config_table(kCases + "config_bad_blockk.json");
  const auto vs = validate_table(t, fp8_block(test::kH200));
  ASSERT_EQ(vs.size(), 1u);
  EXPECT_EQ(vs[0].M, 2);
  EXPECT_EQ(vs[0].key, "BLOCK_SIZE_K");
  EXPECT_EQ(vs[0].value, "256");
  EXPECT_NE(vs[0].rule.find("straddle"), std::string::npos);
}

TEST(ConfigValidate, Table18IsValidOnH200) {
  const ParsedTable t = read_config_table(kCases + "config_table_18.json");
  EXPECT_TRUE(validate_table(t, fp8_block(test::kH200)).empty());
}

TEST(ConfigValidate, DownTableSharesBlockMAndIsMarked) {
  ParsedTable up, down;
  up.entries[16].config = kValid;
  up.entries[64].config = {64, 128, 128, 16, 4, 3, 1};
  down.entries[16].config = {32, 64, 128, 1, 4, 3, 1};  // BM differs from up's 16
  down.entries[64].config = {64, 128, 256, 16, 4, 3, 1};  // same BM, straddles a scale group
  down.entries[128].config = {128, 128, 128, 16, 8, 3, 1};  // no up entry: nothing to share
  const auto vs = validate_table(up, fp8_block(test::kH200), &down);
  ASSERT_EQ(vs.size(), 2u);
  EXPECT_EQ(vs[0].M, 64);
  EXPECT_EQ(vs[0].key, "BLOCK_SIZE_K");
  EXPECT_TRUE(vs[0].down);
  EXPECT_EQ(vs[1].M, 16);
  EXPECT_EQ(vs[1].key, "BLOCK_SIZE_M");
  EXPECT_EQ(vs[1].value, "32");
  EXPECT_EQ(vs[1].rule, "up and down share one alignment");
  EXPECT_TRUE(vs[1].down);
  EXPECT_TRUE(validate_table(up, fp8_block(test::kH200)).empty());
}

}  // namespace
}  // namespace moetune
