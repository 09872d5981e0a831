// MoE layer count: dense-first, every-k-th, listed and start/end/interval rules.
#include <chrono>
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

MoeShape from_file(const std::string& file) {
  return parse_hf_config(model_config(file), {});
}

// A 24-layer MoE config plus `rules`.
int moe_layers(const json& rules) {
  json c = json::parse(R"({"num_experts": 8, "num_experts_per_tok": 2,
    "moe_intermediate_size": 256, "hidden_size": 512, "num_hidden_layers": 24})");
  c.update(rules);
  return parse_hf_config(c, {}).moe_layers;
}

TEST(Layers, RealConfigs) {
  const MoeShape v3 = from_file("deepseek-v3.json");
  EXPECT_EQ(v3.num_layers, 61);
  EXPECT_EQ(v3.moe_layers, 58);
  EXPECT_EQ(from_file("kimi-k2-instruct.json").moe_layers, 60);
  EXPECT_EQ(from_file("deepseek-v2-lite.json").moe_layers, 26);
  EXPECT_EQ(from_file("glm-4.5.json").moe_layers, 89);
  EXPECT_EQ(from_file("llama-4-scout-17b-16e-instruct.json").moe_layers, 48);
  EXPECT_EQ(from_file("qwen2-57b-a14b.json").moe_layers, 28);
  EXPECT_EQ(from_file("qwen3-30b-a3b.json").moe_layers, 48);
  EXPECT_EQ(from_file("mixtral-8x7b-v0.1.json").moe_layers, 32);
  EXPECT_EQ(from_file("dbrx-instruct.json").moe_layers, 40);  // n_layers
}

TEST(Layers, NoRuleMeansEveryLayer) { EXPECT_EQ(moe_layers(json::object()), 24); }

TEST(Layers, EveryKth) {
  EXPECT_EQ(moe_layers({{"decoder_sparse_step", 2}}), 12);       // layers 1, 3, ..., 23
  EXPECT_EQ(moe_layers({{"interleave_moe_layer_step", 4}}), 6);  // layers 3, 7, ..., 23
  EXPECT_EQ(moe_layers({{"decoder_sparse_step", 5}}), 4);        // layers 4, 9, 14, 19
  EXPECT_EQ(moe_layers({{"moe_layer_freq", 2}}), 12);            // DeepSeek: layers 0, 2, ...
}

TEST(Layers, DenseFirstAndListed) {
  EXPECT_EQ(moe_layers({{"first_k_dense_replace", 3}}), 21);
  EXPECT_EQ(moe_layers({{"mlp_only_layers", {0, 5, 99}}}), 22);  // 99 is past the last layer
  EXPECT_EQ(moe_layers({{"moe_layers", {1, 2, 3}}}), 3);
}

TEST(Layers, StartEndInterval) {
  EXPECT_EQ(moe_layers({{"moe_layer_start_index", 1}}), 23);
  EXPECT_EQ(moe_layers({{"moe_layer_start_index", 1}, {"moe_layer_end_index", -1}}), 23);
  EXPECT_EQ(moe_layers({{"moe_layer_start_index", 2}, {"moe_layer_end_index", 9}}), 8);
  EXPECT_EQ(moe_layers({{"moe_layer_interval", 2}}), 12);
  // One bound per modality: the widest range.
  EXPECT_EQ(moe_layers({{"moe_layer_start_index", {1, 3}}, {"moe_layer_end_index", {20, -1}}}), 23);
  EXPECT_EQ(moe_layers({{"moe_layer_start_index", {2, 1}}, {"moe_layer_end_index", {9, 5}}}), 9);
}

TEST(Layers, RulesCombine) {
  // Dense first 3, then every other layer counted from 1: 3, 5, ..., 23 minus listed 7.
  EXPECT_EQ(
      moe_layers(
          {{"first_k_dense_replace", 3}, {"decoder_sparse_step", 2}, {"mlp_only_layers", {7}}}),
      10);
  EXPECT_EQ(moe_layers({{"first_k_dense_replace", 1}, {"moe_layer_freq", 1}}), 23);
}

TEST(Layers, PerLayerFlags) {
  json flags = json::array();
  for (int i = 0; i < 24; ++i) flags.push_back(i % 3 == 0 ? 1 : 0);
  EXPECT_EQ(moe_layers({{"moe_layer_freq", flags}}), 8);
  flags.erase(flags.begin());  // 23 flags for 24 layers
  EXPECT_EQ(input_error([&] {
              moe_layers({{"moe_layer_freq", flags}});
            }).field(),
            "moe_layer_freq");
}

TEST(Layers, BadRules) {
  EXPECT_EQ(input_error([] {
              moe_layers({{"decoder_sparse_step", 0}});
            }).field(),
            "decoder_sparse_step");
  EXPECT_EQ(input_error([] {
              moe_layers({{"mlp_only_layers", "all"}});
            }).field(),
            "mlp_only_layers");
  EXPECT_EQ(input_error([] {
              moe_layers({{"mlp_only_layers", {1, -2}}});
            }).field(),
            "mlp_only_layers[1]");
  EXPECT_EQ(input_error([] {
              moe_layers({{"first_k_dense_replace", "3"}});
            }).field(),
            "first_k_dense_replace");
  // Rules that leave no MoE layer.
  EXPECT_EQ(input_error([] {
              moe_layers({{"first_k_dense_replace", 24}});
            }).field(),
            "num_hidden_layers");
}

TEST(Layers, AbsurdLayerCountIsRefusedNotCountedForMinutes) {
  json c = json::parse(R"({"num_experts": 8, "num_experts_per_tok": 2,
    "moe_intermediate_size": 256, "hidden_size": 512, "decoder_sparse_step": 1})");
  c["num_hidden_layers"] = 2147483647;
  const auto t0 = std::chrono::steady_clock::now();
  const InputError e = input_error([&] { parse_hf_config(c, {}); });
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
  EXPECT_EQ(e.field(), "num_hidden_layers");
  EXPECT_EQ(e.value(), "2147483647");
  c["num_hidden_layers"] = 1'000'000;  // the largest accepted
  EXPECT_EQ(parse_hf_config(c, {}).moe_layers, 1'000'000);
}

TEST(Layers, UnknownLayerCount) {
  const json c = json::parse(R"({"num_experts": 8, "num_experts_per_tok": 2,
    "moe_intermediate_size": 256, "hidden_size": 512})");
  const MoeShape s = parse_hf_config(c, {});
  EXPECT_EQ(s.num_layers, 0);
  EXPECT_EQ(s.moe_layers, 0);
}

}  // namespace
}  // namespace moetune
