// parse_hf_config: field synonyms, text_config nesting, overrides and bad input.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "moetune/error.hpp"
#include "moetune/model.hpp"
#include "model_test_util.hpp"

namespace moetune {
namespace {

using testing::input_error;
using testing::model_config;
using nlohmann::json;

// A small, complete MoE config to vary.
json tiny() {
  return json::parse(R"({"architectures": ["TinyMoe"], "num_experts": 8,
    "num_experts_per_tok": 2, "moe_intermediate_size": 256, "hidden_size": 512,
    "num_hidden_layers": 4})");
}

TEST(HfConfig, TextConfigNestingWithTopLevelQuantization) {
  const MoeShape s = parse_hf_config(model_config("qwen3.5-122b-a10b-fp8.json"), {});
  EXPECT_EQ(s.architecture, "Qwen3_5MoeForConditionalGeneration");
  EXPECT_EQ(s.E, 256);
  EXPECT_EQ(s.E_global, 256);
  EXPECT_EQ(s.N, 1024);
  EXPECT_EQ(s.K, 3072);
  EXPECT_EQ(s.topk, 8);
  EXPECT_EQ(s.dtype, Dtype::fp8_w8a8);
  ASSERT_TRUE(s.block_shape.has_value());
  EXPECT_EQ(*s.block_shape, (std::array<int, 2>{128, 128}));
  EXPECT_EQ(s.num_layers, 48);
  EXPECT_EQ(s.moe_layers, 48);
}

TEST(HfConfig, SynonymsThatDisagreeAreBadInput) {
  json c = tiny();
  c["num_local_experts"] = 16;  // num_experts is 8
  InputError e = input_error([&] { parse_hf_config(c, {}); });
  EXPECT_EQ(e.field(), "num_local_experts");
  EXPECT_EQ(e.value(), "16");
  c["num_local_experts"] = 8;  // agreeing synonyms are fine
  EXPECT_EQ(parse_hf_config(c, {}).E, 8);
  c = tiny();
  c["experts_per_token"] = 4;  // num_experts_per_tok is 2
  e = input_error([&] { parse_hf_config(c, {}); });
  EXPECT_EQ(e.field(), "experts_per_token");
  EXPECT_EQ(e.value(), "4");
}

TEST(HfConfig, DeepSeekWithoutTheExpertSizeIsNotGivenTheDenseOne) {
  // DeepSeek-V3's intermediate_size (18432) is its dense layers': no moe_intermediate_size (or
  // a null one) is bad input, not N = 18432.
  for (const bool null_field : {false, true}) {
    json c = model_config("deepseek-v3.json");
    if (null_field) {
      c["moe_intermediate_size"] = nullptr;
    } else {
      c.erase("moe_intermediate_size");
    }
    const InputError e = input_error([&] { parse_hf_config(c, {}); });
    EXPECT_EQ(e.field(), "moe_intermediate_size") << null_field;
    EXPECT_NE(e.reason().find("first_k_dense_replace"), std::string::npos) << e.reason();
    ModelOptions o;
    o.intermediate = 2048;
    EXPECT_EQ(parse_hf_config(c, o).N, 2048);
  }
  // Families whose intermediate_size is the expert size keep reading it (Mixtral).
  EXPECT_EQ(parse_hf_config(model_config("mixtral-8x7b-v0.1.json"), {}).N, 14336);
}

TEST(HfConfig, TopLevelDtypeWinsOverNested) {
  json c = {{"architectures", {"Wrapper"}}, {"text_config", tiny()}};
  c["text_config"]["dtype"] = "float16";
  EXPECT_EQ(parse_hf_config(c, {}).dtype, Dtype::fp16);  // only the nested one: used
  c["torch_dtype"] = "bfloat16";
  EXPECT_EQ(parse_hf_config(c, {}).dtype, Dtype::bf16);  // the top level wins
}

TEST(HfConfig, TopLevelQuantizationWinsNestedIsFound) {
  json c = {{"architectures", {"Wrapper"}}, {"text_config", tiny()}};
  c["text_config"]["quantization_config"] = {{"quant_method", "fp8"},
                                             {"weight_block_size", {128, 128}}};
  EXPECT_EQ(parse_hf_config(c, {}).dtype, Dtype::fp8_w8a8);  // nested only: found there
  c["quantization_config"] = {{"quant_method", "mxfp4"}};
  EXPECT_EQ(input_error([&] { parse_hf_config(c, {}); }).value(), "mxfp4");  // top wins
}

TEST(HfConfig, NestedMoeFieldsWinAndArchitectureStaysOnTop) {
  json c = {{"architectures", {"Outer"}}, {"hidden_size", 99}, {"text_config", tiny()}};
  c["text_config"]["architectures"] = {"Inner"};
  const MoeShape s = parse_hf_config(c, {});
  EXPECT_EQ(s.K, 512);
  EXPECT_EQ(s.architecture, "Outer");
}

TEST(HfConfig, OtherWrapperKeys) {
  for (const char* key : {"language_config", "llm_config"}) {
    const json c = {{"architectures", {"Vl"}}, {key, tiny()}};
    EXPECT_EQ(parse_hf_config(c, {}).E, 8) << key;
  }
  const json omni = {{"thinker_config", {{"text_config", tiny()}}}};
  EXPECT_EQ(parse_hf_config(omni, {}).topk, 2);
}

TEST(HfConfig, ExpertAndTopkSynonyms) {
  const json ernie = json::parse(R"({"moe_num_experts": 64, "moe_k": 6,
    "moe_intermediate_size": 1536, "hidden_size": 2560, "num_hidden_layers": 28})");
  const MoeShape e = parse_hf_config(ernie, {});
  EXPECT_EQ(e.E, 64);
  EXPECT_EQ(e.topk, 6);
  json c = tiny();
  c.erase("num_experts_per_tok");
  c["top_k_experts"] = 3;
  EXPECT_EQ(parse_hf_config(c, {}).topk, 3);
  c.erase("top_k_experts");
  c["moe_topk"] = json::array({4, 4, 4, 4});  // per-layer list of one value
  EXPECT_EQ(parse_hf_config(c, {}).topk, 4);
  c["moe_topk"] = json::array({4, 2});
  EXPECT_EQ(input_error([&] { parse_hf_config(c, {}); }).field(), "moe_topk");
}

TEST(HfConfig, DbrxFfnConfig) {
  const MoeShape s = parse_hf_config(model_config("dbrx-instruct.json"), {});
  EXPECT_EQ(s.E, 16);
  EXPECT_EQ(s.topk, 4);
  EXPECT_EQ(s.N, 10752);
  EXPECT_EQ(s.K, 6144);
  EXPECT_EQ(s.num_layers, 40);
}

TEST(HfConfig, MoeIntermediateSizeBeatsIntermediateSize) {
  const MoeShape s = parse_hf_config(model_config("deepseek-v3.json"), {});
  EXPECT_EQ(s.N, 2048);  // not the dense layers' 18432
  const MoeShape m = parse_hf_config(model_config("mixtral-8x22b-v0.1.json"), {});
  EXPECT_EQ(m.N, 16384);  // Mixtral's experts use intermediate_size
}

TEST(HfConfig, OverridesReplaceConfigValuesBeforeParallelism) {
  ModelOptions o;
  o.experts = 64;
  o.topk = 4;
  o.intermediate = 1000;
  o.hidden = 1024;
  o.tp = 4;
  o.ep = 2;
  const MoeShape s = parse_hf_config(model_config("qwen3-30b-a3b.json"), o);
  EXPECT_EQ(s.E_global, 64);
  EXPECT_EQ(s.E, 32);
  EXPECT_EQ(s.topk, 4);
  EXPECT_EQ(s.N, 250);
  EXPECT_EQ(s.K, 1024);
  EXPECT_EQ(s.architecture, "Qwen3MoeForCausalLM");
}

TEST(HfConfig, OverridesCompleteAConfigMissingFields) {
  ModelOptions o;
  o.experts = 16;
  o.topk = 2;
  o.intermediate = 512;
  o.hidden = 2048;
  const MoeShape s = parse_hf_config(json::parse(R"({"architectures": ["NewFamily"],
    "num_hidden_layers": 10})"),
                                     o);
  EXPECT_EQ(s.architecture, "NewFamily");
  EXPECT_EQ(s.E, 16);
  EXPECT_EQ(s.moe_layers, 10);
  const MoeShape bare = parse_hf_config(json::object(), o);
  EXPECT_EQ(bare.architecture, "");
  EXPECT_EQ(bare.N, 512);
  EXPECT_EQ(bare.num_layers, 0);  // unknown without a config
}

TEST(HfConfig, MissingFieldNamesFieldAndOverride) {
  ModelOptions o;
  o.experts = 16;
  o.topk = 2;
  o.intermediate = 512;
  const InputError e = input_error([&] { parse_hf_config(json::object(), o, "x.json"); });
  EXPECT_EQ(e.field(), "hidden_size");
  EXPECT_NE(std::string(e.what()).find("--hidden"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("x.json"), std::string::npos) << e.what();
  json c = tiny();
  c.erase("num_experts_per_tok");
  EXPECT_EQ(input_error([&] { parse_hf_config(c, {}); }).field(), "num_experts_per_tok");
  c = tiny();
  c.erase("moe_intermediate_size");
  EXPECT_EQ(input_error([&] { parse_hf_config(c, {}); }).field(), "moe_intermediate_size");
}

TEST(HfConfig, BadOverrides) {
  ModelOptions o;
  o.experts = 0;
  EXPECT_EQ(input_error([&] { parse_hf_config(tiny(), o); }).field(), "experts");
  o = {};
  o.topk = 9;  // more than the 8 experts
  const InputError e = input_error([&] { parse_hf_config(tiny(), o); });
  EXPECT_EQ(e.field(), "topk");
  EXPECT_EQ(e.value(), "9");
}

TEST(HfConfig, DenseModelRefusedNamingTheFile) {
  const json dense = json::parse(R"({"architectures": ["LlamaForCausalLM"],
    "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32})");
  const InputError e = input_error([&] { parse_hf_config(dense, {}, "llama/config.json"); });
  EXPECT_EQ(e.field(), "model");
  EXPECT_EQ(e.value(), "llama/config.json");
  EXPECT_NE(std::string(e.what()).find("not a MoE model (no expert count"), std::string::npos);
  for (int experts : {0, 1}) {
    json c = tiny();
    c["num_experts"] = experts;
    EXPECT_NE(
        std::string(input_error([&] { parse_hf_config(c, {}); }).what()).find("not a MoE model"),
        std::string::npos);
  }
}

TEST(HfConfig, BadSizesNameTheJsonField) {
  struct Bad {
    const char* key;
    json value;
  };
  for (const Bad& b : {Bad{"hidden_size", "4096"}, Bad{"num_experts", -8},
                       Bad{"moe_intermediate_size", 768.5}, Bad{"num_experts_per_tok", true},
                       Bad{"num_hidden_layers", -1}, Bad{"hidden_size", 1LL << 40}}) {
    json c = tiny();
    c[b.key] = b.value;
    const InputError e = input_error([&] { parse_hf_config(c, {}); });
    EXPECT_EQ(e.field(), b.key) << e.what();
  }
  json c = tiny();
  c["hidden_size"] = "4096";
  // Quoted as written: `hidden_size=4096: must be an integer` would read as a valid value.
  EXPECT_EQ(input_error([&] { parse_hf_config(c, {}); }).value(), "\"4096\"");
  json nested = {{"text_config", tiny()}};
  nested["text_config"]["hidden_size"] = "x";
  EXPECT_EQ(input_error([&] { parse_hf_config(nested, {}); }).field(), "text_config.hidden_size");
  // A count past int32 says so, not just "a non-negative integer" (which 2^40 is).
  c = tiny();
  c["hidden_size"] = 1LL << 40;
  EXPECT_NE(std::string(input_error([&] { parse_hf_config(c, {}); }).what()).find("below 2^31"),
            std::string::npos);
}

TEST(HfConfig, OddShapesStayInputErrors) {
  EXPECT_EQ(input_error([&] {
              parse_hf_config(json::array({1, 2}), {}, "a.json");
            }).field(),
            "model");
  json c = tiny();
  c["architectures"] = 5;  // unusable: no architecture, not a crash
  EXPECT_EQ(parse_hf_config(c, {}).architecture, "");
  const json odd = {{"ffn_config", 5}, {"text_config", "x"}, {"hidden_size", 8}};
  EXPECT_EQ(input_error([&] { parse_hf_config(odd, {}); }).field(), "model");  // no experts
}

// json::dump recurses once per level: a value nested 100,000 deep overflowed the stack while the
// message was formatted (a segfault instead of exit 2). The parser itself accepts any depth.
TEST(HfConfig, DeeplyNestedBadValueIsAShortInputError) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  for (const char* key : {"num_experts", "quantization_config", "hidden_size"}) {
    json c = tiny();
    c[key] = json::parse(deep);
    const InputError e = input_error([&] { parse_hf_config(c, {}); });
    EXPECT_EQ(e.field(), key);
    EXPECT_LE(e.value().size(), 63u) << e.value();
    EXPECT_EQ(e.value().rfind("[[[[", 0), 0u) << e.value();
  }
  json c = tiny();
  c["hidden_size"] = {{"a", {1, 2}}, {"b", "x"}};  // short values print as json::dump does
  EXPECT_EQ(input_error([&] { parse_hf_config(c, {}); }).value(), R"({"a":[1,2],"b":"x"})");
}

TEST(HfConfig, SourceIsKept) {
  EXPECT_EQ(parse_hf_config(tiny(), {}, "some/config.json").source, "some/config.json");
}

}  // namespace
}  // namespace moetune
