#include <algorithm>
#include <fstream>
#include <iterator>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "moetune/config.hpp"

namespace moetune {
namespace {

MoeShape shape(int E, int N, Dtype dtype, std::optional<std::array<int, 2>> block_shape) {
  MoeShape s;
  s.E = E;
  s.N = N;
  s.dtype = dtype;
  s.block_shape = block_shape;
  return s;
}

TEST(ConfigFileName, Fp8BlockOnH200BothStyles) {
  const MoeShape s = shape(256, 256, Dtype::fp8_w8a8, std::array{128, 128});
  EXPECT_EQ(config_file_name(s, "NVIDIA H200"),
            "E=256,N=256,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128, 128].json");
  EXPECT_EQ(config_file_name(s, "NVIDIA H200", Naming::vllm),
            "E=256,N=256,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json");
}

TEST(ConfigFileName, Fp8PerTensorHasNoBlockShape) {
  const MoeShape s = shape(60, 704, Dtype::fp8_w8a8, std::nullopt);
  EXPECT_EQ(config_file_name(s, "NVIDIA B200"),
            "E=60,N=704,device_name=NVIDIA_B200,dtype=fp8_w8a8.json");
}

TEST(ConfigFileName, SixteenBitOmitsDtype) {
  EXPECT_EQ(config_file_name(shape(8, 7168, Dtype::bf16, std::nullopt), "NVIDIA H200"),
            "E=8,N=7168,device_name=NVIDIA_H200.json");
  EXPECT_EQ(config_file_name(shape(8, 7168, Dtype::fp16, std::nullopt), "NVIDIA H200"),
            "E=8,N=7168,device_name=NVIDIA_H200.json");
}

TEST(ConfigFileName, EverySpaceOfTheDeviceBecomesUnderscore) {
  EXPECT_EQ(config_file_name(shape(16, 1536, Dtype::bf16, std::nullopt),
                             "NVIDIA RTX PRO 6000 Blackwell Server Edition"),
            "E=16,N=1536,device_name=NVIDIA_RTX_PRO_6000_Blackwell_Server_Edition.json");
}

// The servers look up one file for the whole H200 family (a '_'-separated token "H200").
TEST(ConfigFileName, TheH200FamilySharesOneName) {
  const MoeShape s = shape(256, 256, Dtype::bf16, std::nullopt);
  EXPECT_EQ(config_file_name(s, "NVIDIA H200 NVL"), "E=256,N=256,device_name=NVIDIA_H200.json");
  EXPECT_EQ(config_file_name(s, "NVIDIA H200 141GB HBM3e", Naming::vllm),
            "E=256,N=256,device_name=NVIDIA_H200.json");
  EXPECT_EQ(config_file_name(s, "H200"), "E=256,N=256,device_name=NVIDIA_H200.json");
  EXPECT_EQ(config_file_name(s, "NVIDIA H20"), "E=256,N=256,device_name=NVIDIA_H20.json");
  EXPECT_EQ(config_file_name(s, "NVIDIA H2000"), "E=256,N=256,device_name=NVIDIA_H2000.json");
}

TEST(ConfigFileName, DownSuffixGoesBeforeTheExtension) {
  const MoeShape s = shape(256, 256, Dtype::fp8_w8a8, std::array{128, 128});
  EXPECT_EQ(config_file_name(s, "NVIDIA H200", Naming::sglang, true),
            "E=256,N=256,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128, 128]_down.json");
  EXPECT_EQ(config_file_name(s, "NVIDIA H200", Naming::vllm, true),
            "E=256,N=256,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128]_down.json");
}

TEST(ConfigFileName, SidecarReplacesJsonExtension) {
  EXPECT_EQ(sidecar_name("E=8,N=7168,device_name=NVIDIA_H200.json"),
            "E=8,N=7168,device_name=NVIDIA_H200.meta.json");
  EXPECT_EQ(sidecar_name("table"), "table.meta.json");
}

// Every case of shapes_expected.json that names file names, with the shape built from its
// expected fields and the device from its --gpu argument.
TEST(ConfigFileName, MatchesShapesExpectedCases) {
  std::ifstream in(std::string(MOETUNE_TEST_DATA) + "/cases/shapes_expected.json");
  ASSERT_TRUE(in) << "cannot open shapes_expected.json";
  const nlohmann::json cases = nlohmann::json::parse(in)["cases"];
  int checked = 0;
  for (const auto& c : cases) {
    if (!c.contains("sglang_file")) continue;
    const auto& expect = c["expect"];
    const auto args = c["args"].get<std::vector<std::string>>();
    const auto gpu_arg = std::find(args.begin(), args.end(), "--gpu");
    ASSERT_NE(gpu_arg, args.end()) << c.dump();
    const std::string device = *std::next(gpu_arg);
    std::optional<std::array<int, 2>> block_shape;
    if (expect.contains("block_shape") && !expect["block_shape"].is_null()) {
      block_shape = expect["block_shape"].get<std::array<int, 2>>();
    }
    const Dtype dtype = *parse_dtype(expect.value("dtype", "bf16"));
    const MoeShape s = shape(expect["E"], expect["N"], dtype, block_shape);
    EXPECT_EQ(config_file_name(s, device), c["sglang_file"].get<std::string>()) << c.dump();
    if (c.contains("vllm_file")) {
      EXPECT_EQ(config_file_name(s, device, Naming::vllm), c["vllm_file"].get<std::string>());
    }
    ++checked;
  }
  EXPECT_EQ(checked, 5);
}

}  // namespace
}  // namespace moetune
