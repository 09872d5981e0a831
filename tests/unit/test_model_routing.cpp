// Routing fields: scoring, renormalize, grouped top-k, scaling, correction bias.
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

Routing routing_of(const std::string& file) {
  return parse_hf_config(model_config(file), {}).routing;
}

json tiny() {
  return json::parse(R"({"num_experts": 16, "num_experts_per_tok": 4,
    "moe_intermediate_size": 256, "hidden_size": 512})");
}

TEST(Routing, DeepseekV3GroupedSigmoidWithBias) {
  const Routing r = routing_of("deepseek-v3.json");
  EXPECT_EQ(r.scoring, "sigmoid");
  EXPECT_TRUE(r.renormalize);
  EXPECT_EQ(r.n_group, 8);
  EXPECT_EQ(r.topk_group, 4);
  EXPECT_DOUBLE_EQ(r.routed_scaling_factor, 2.5);
  EXPECT_TRUE(r.correction_bias);
}

TEST(Routing, OlmoeSoftmaxWithoutRenormalize) {
  const Routing r = routing_of("olmoe-1b-7b-0924.json");
  EXPECT_EQ(r.scoring, "softmax");
  EXPECT_FALSE(r.renormalize);
  EXPECT_EQ(r.n_group, 1);
  EXPECT_EQ(r.topk_group, 1);
  EXPECT_DOUBLE_EQ(r.routed_scaling_factor, 1.0);
  EXPECT_FALSE(r.correction_bias);
}

TEST(Routing, DefaultsWhenAbsent) {
  const Routing r = routing_of("mixtral-8x7b-v0.1.json");
  EXPECT_EQ(r.scoring, "softmax");
  EXPECT_TRUE(r.renormalize);
  EXPECT_EQ(r.n_group, 1);
  EXPECT_FALSE(r.correction_bias);
  const Routing kimi = routing_of("kimi-k2-instruct.json");
  EXPECT_DOUBLE_EQ(kimi.routed_scaling_factor, 2.827);
  EXPECT_EQ(kimi.n_group, 1);
}

// GLM-4.5/4.6 configs name no scoring_func; their router (transformers' Glm4MoeTopkRouter, vLLM
// and SGLang glm4_moe) is sigmoid with a correction bias: from the architecture, with a note.
TEST(Routing, Glm4MoeSigmoidWithBiasFromArchitecture) {
  for (const char* file : {"glm-4.5.json", "glm-4.6.json"}) {
    const Routing r = routing_of(file);
    EXPECT_EQ(r.scoring, "sigmoid") << file;
    EXPECT_TRUE(r.correction_bias) << file;
    EXPECT_TRUE(r.renormalize) << file;
    EXPECT_NE(r.note.find("Glm4MoeForCausalLM"), std::string::npos) << r.note;
  }
  EXPECT_DOUBLE_EQ(routing_of("glm-4.5.json").routed_scaling_factor, 2.5);
  // A config that names its scoring function wins for the scoring; the bias still comes from
  // the router unless topk_method names the method. Both named: no note.
  json c = tiny();
  c["architectures"] = json::array({"Glm4MoeForCausalLM"});
  c["scoring_func"] = "sigmoid";
  const Routing scoring_named = parse_hf_config(c, {}).routing;
  EXPECT_EQ(scoring_named.scoring, "sigmoid");
  EXPECT_TRUE(scoring_named.correction_bias);
  EXPECT_NE(scoring_named.note.find("a correction bias, which config.json does not name"),
            std::string::npos)
      << scoring_named.note;
  c["topk_method"] = "greedy";
  const Routing both_named = parse_hf_config(c, {}).routing;
  EXPECT_FALSE(both_named.correction_bias);
  EXPECT_EQ(both_named.note, "");
  // Without architectures, model_type names the router.
  json t = tiny();
  t["model_type"] = "glm4_moe";
  const Routing by_type = parse_hf_config(t, {}).routing;
  EXPECT_EQ(by_type.scoring, "sigmoid");
  EXPECT_TRUE(by_type.correction_bias);
  EXPECT_NE(by_type.note.find("glm4_moe's router"), std::string::npos) << by_type.note;
}

// Known softmax routers need no note; an unknown architecture gets softmax with a note saying
// it was assumed; Llama 4 (router weight on the input) gets its own note.
TEST(Routing, NoteWhenTheScoringIsNotNamed) {
  EXPECT_EQ(routing_of("mixtral-8x7b-v0.1.json").note, "");
  EXPECT_EQ(routing_of("qwen3.5-122b-a10b.json").note, "");
  EXPECT_EQ(routing_of("deepseek-v3.json").note, "");  // names scoring_func
  json c = tiny();
  c["architectures"] = json::array({"FutureMoeForCausalLM"});
  const Routing unknown = parse_hf_config(c, {}).routing;
  EXPECT_EQ(unknown.scoring, "softmax");
  EXPECT_NE(unknown.note.find("softmax assumed"), std::string::npos) << unknown.note;
  EXPECT_NE(unknown.note.find("FutureMoeForCausalLM"), std::string::npos) << unknown.note;
  const Routing llama = routing_of("llama-4-scout-17b-16e-instruct.json");
  EXPECT_NE(llama.note.find("Llama 4"), std::string::npos) << llama.note;
}

TEST(Routing, NullFieldsAreAbsent) {
  json c = tiny();
  c["n_group"] = nullptr;
  c["topk_group"] = nullptr;
  c["scoring_func"] = nullptr;
  const Routing r = parse_hf_config(c, {}).routing;
  EXPECT_EQ(r.n_group, 1);
  EXPECT_EQ(r.scoring, "softmax");
}

TEST(Routing, BadFields) {
  json c = tiny();
  c["scoring_func"] = "sparsemax";
  EXPECT_EQ(input_error([&] { parse_hf_config(c, {}); }).field(), "scoring_func");
  c = tiny();
  c["n_group"] = 3;  // 16 experts do not split into 3 groups
  EXPECT_EQ(input_error([&] { parse_hf_config(c, {}); }).field(), "n_group");
  c["n_group"] = 4;
  c["topk_group"] = 5;
  EXPECT_EQ(input_error([&] { parse_hf_config(c, {}); }).field(), "topk_group");
  c["n_group"] = 8;  // groups of 2, keeping 1 group: 2 experts < topk 4
  c["topk_group"] = 1;
  EXPECT_EQ(input_error([&] { parse_hf_config(c, {}); }).field(), "topk_group");
  c = tiny();
  c["norm_topk_prob"] = "yes";
  EXPECT_EQ(input_error([&] { parse_hf_config(c, {}); }).field(), "norm_topk_prob");
  c = tiny();
  c["routed_scaling_factor"] = 0;
  EXPECT_EQ(input_error([&] { parse_hf_config(c, {}); }).field(), "routed_scaling_factor");
}

}  // namespace
}  // namespace moetune
