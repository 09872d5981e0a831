// The embedded presets: names, content equal to the test data, all loadable.
#include <algorithm>
#include <map>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "moetune/error.hpp"
#include "moetune/model.hpp"
#include "model_test_util.hpp"

namespace moetune {
namespace {

using testing::model_config;
using nlohmann::json;

bool has_preset(const std::string& name) {
  const auto names = preset_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

TEST(Presets, RequiredNamesExist) {
  for (const char* name : {"qwen3.5-122b-a10b-fp8", "qwen3.5-122b-a10b", "deepseek-v3",
                           "deepseek-r1", "kimi-k2-instruct", "qwen3-30b-a3b", "qwen3-30b-a3b-fp8",
                           "qwen3-235b-a22b", "qwen3-235b-a22b-fp8", "mixtral-8x7b",
                           "mixtral-8x22b", "gpt-oss-120b", "qwen3-next-80b-a3b", kDefaultPreset}) {
    EXPECT_TRUE(has_preset(name)) << name;
  }
}

TEST(Presets, NamesAreShortLowercaseAndSorted) {
  const auto names = preset_names();
  EXPECT_GE(names.size(), 25u);
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  for (const auto& n : names) {
    EXPECT_TRUE(std::none_of(n.begin(), n.end(), [](char c) { return std::isupper(c); })) << n;
    EXPECT_FALSE(n.ends_with(".json")) << n;
  }
}

TEST(Presets, AllLoadWithoutOptions) {
  for (const auto& name : preset_names()) {
    SCOPED_TRACE(name);
    const MoeShape s = load_model(name, {});
    EXPECT_EQ(s.source, name);
    EXPECT_GT(s.E, 1);
    EXPECT_GT(s.N, 0);
    EXPECT_GT(s.K, 0);
    EXPECT_GT(s.moe_layers, 0);
    EXPECT_EQ(s.tp, 1);
    EXPECT_EQ(s.ep, 1);
  }
}

TEST(Presets, ContentMatchesTheTestData) {
  const std::map<std::string, std::string> files = {
      {"deepseek-v3", "deepseek-v3.json"},
      {"mixtral-8x7b", "mixtral-8x7b-v0.1.json"},
      {"mixtral-8x22b", "mixtral-8x22b-v0.1.json"},
      {"llama-4-scout", "llama-4-scout-17b-16e-instruct.json"},
      {"qwen3.5-122b-a10b-fp8", "qwen3.5-122b-a10b-fp8.json"},
      {"gpt-oss-120b", "gpt-oss-120b.json"}};
  for (const auto& [name, file] : files) {
    const auto text = preset_json(name);
    ASSERT_TRUE(text.has_value()) << name;
    EXPECT_EQ(json::parse(*text), model_config(file)) << name;
  }
  EXPECT_FALSE(preset_json("no-such-preset").has_value());
  EXPECT_TRUE(preset_json("DeepSeek-V3").has_value());  // any case
}

TEST(Presets, DefaultIsQwen35Fp8AtTp4) {
  ModelOptions o;
  o.tp = kDefaultTp;
  const MoeShape s = load_model(kDefaultPreset, o);
  EXPECT_EQ(s.E, 256);
  EXPECT_EQ(s.N, 256);
  EXPECT_EQ(s.K, 3072);
  EXPECT_EQ(s.topk, 8);
  EXPECT_EQ(s.dtype, Dtype::fp8_w8a8);
  EXPECT_EQ(s.block_shape, (std::array<int, 2>{128, 128}));
}

TEST(Presets, GptOssLoadsAsBf16UnlessAsked) {
  const MoeShape s = load_model("gpt-oss-120b", {});
  EXPECT_EQ(s.dtype, Dtype::bf16);
  EXPECT_EQ(s.E, 128);
  EXPECT_EQ(s.N, 2880);
  EXPECT_EQ(s.topk, 4);
  EXPECT_EQ(load_model("gpt-oss-20b", {}).dtype, Dtype::bf16);
  // The preset's choice is said (shapes prints it), a chosen dtype needs no note.
  EXPECT_NE(s.dtype_note.find("mxfp4"), std::string::npos) << s.dtype_note;
  ModelOptions fp8;
  fp8.dtype = "fp8_w8a8";
  EXPECT_EQ(load_model("gpt-oss-120b", fp8).dtype, Dtype::fp8_w8a8);
  EXPECT_EQ(load_model("gpt-oss-120b", fp8).dtype_note, "");
  EXPECT_EQ(load_model("mixtral-8x7b", {}).dtype_note, "");
}

TEST(Presets, FullHuggingFaceNamesAreAliases) {
  const MoeShape s = load_model("Mixtral-8x7B-v0.1", {});
  EXPECT_EQ(s.source, "mixtral-8x7b");
  EXPECT_EQ(s.N, 14336);
  EXPECT_EQ(load_model("llama-4-scout-17b-16e-instruct", {}).source, "llama-4-scout");
  EXPECT_TRUE(preset_json("qwen3-vl-30b-a3b-instruct").has_value());
  const auto names = preset_names();
  EXPECT_EQ(std::count(names.begin(), names.end(), "mixtral-8x7b-v0.1"), 0);  // not listed
}

TEST(Presets, DefaultDtypeAppliesToAnyCaseOfAuto) {
  ModelOptions o;
  o.dtype = "AUTO";
  EXPECT_EQ(load_model("GPT-OSS-120B", o).dtype, Dtype::bf16);
}

TEST(Presets, Shapes) {
  const MoeShape v3 = load_model("deepseek-v3", {});
  EXPECT_EQ(v3.N, 2048);
  EXPECT_EQ(v3.moe_layers, 58);
  EXPECT_EQ(load_model("mixtral-8x7b", {}).N, 14336);
  EXPECT_EQ(load_model("qwen3-next-80b-a3b", {}).E, 512);
  EXPECT_EQ(load_model("kimi-k2-instruct", {}).E, 384);
}

}  // namespace
}  // namespace moetune
