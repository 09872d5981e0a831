// dtype and fp8 block shape: quantization_config, --dtype, --block-shape, refused methods.
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
using testing::contains;
using nlohmann::json;
using Block = std::array<int, 2>;

json tiny(json quant = nullptr) {
  json c = json::parse(R"({"num_experts": 8, "num_experts_per_tok": 2,
    "moe_intermediate_size": 256, "hidden_size": 512, "num_hidden_layers": 4})");
  if (!quant.is_null()) c["quantization_config"] = std::move(quant);
  return c;
}

ModelOptions with_dtype(const std::string& dtype) {
  ModelOptions o;
  o.dtype = dtype;
  return o;
}

TEST(Precision, UnquantizedIsBf16OrFp16FromConfigDtype) {
  EXPECT_EQ(parse_hf_config(tiny(), {}).dtype, Dtype::bf16);
  json c = tiny();
  c["torch_dtype"] = "float16";
  EXPECT_EQ(parse_hf_config(c, {}).dtype, Dtype::fp16);
  c["torch_dtype"] = "float32";
  EXPECT_EQ(parse_hf_config(c, {}).dtype, Dtype::bf16);
  EXPECT_FALSE(parse_hf_config(c, {}).block_shape.has_value());
  // A 32-bit checkpoint says that it is analysed as bf16; a 16-bit one says nothing.
  EXPECT_TRUE(contains(parse_hf_config(c, {}).dtype_note, "torch_dtype is float32"));
  c["torch_dtype"] = "bfloat16";
  EXPECT_EQ(parse_hf_config(c, {}).dtype_note, "");
}

TEST(Precision, ADtypeThatNamesNoDtypeIsBadInput) {
  // It read as bf16 whatever it held.
  for (const json& v : {json("foo"), json(5), json(true), json("int4")}) {
    json c = tiny();
    c["torch_dtype"] = v;
    const InputError e = input_error([&] { parse_hf_config(c, {}); });
    EXPECT_EQ(e.field(), "torch_dtype") << v;
    EXPECT_EQ(e.value(), v.is_string() ? v.get<std::string>() : v.dump()) << v;
    // --dtype makes it moot.
    EXPECT_EQ(parse_hf_config(c, with_dtype("fp16")).dtype, Dtype::fp16) << v;
  }
}

TEST(Precision, Fp8BlockAndPerTensor) {
  const MoeShape block = parse_hf_config(model_config("deepseek-v3.json"), {});
  EXPECT_EQ(block.dtype, Dtype::fp8_w8a8);
  EXPECT_EQ(block.block_shape, (Block{128, 128}));
  const MoeShape per_tensor =
      parse_hf_config(tiny({{"quant_method", "fp8"}, {"activation_scheme", "dynamic"}}), {});
  EXPECT_EQ(per_tensor.dtype, Dtype::fp8_w8a8);
  EXPECT_FALSE(per_tensor.block_shape.has_value());
  const MoeShape null_block =
      parse_hf_config(tiny({{"quant_method", "fp8"}, {"weight_block_size", nullptr}}), {});
  EXPECT_FALSE(null_block.block_shape.has_value());
}

TEST(Precision, ExplicitSixteenBitSkipsQuantizationCheck) {
  const MoeShape a = parse_hf_config(model_config("gpt-oss-120b.json"), with_dtype("bf16"));
  EXPECT_EQ(a.dtype, Dtype::bf16);
  EXPECT_EQ(a.E, 128);
  const MoeShape b = parse_hf_config(model_config("deepseek-v3.json"), with_dtype("fp16"));
  EXPECT_EQ(b.dtype, Dtype::fp16);
  EXPECT_FALSE(b.block_shape.has_value());
}

TEST(Precision, ExplicitFp8) {
  // A 16-bit model: per-tensor, or block-wise with --block-shape.
  const MoeShape pt = parse_hf_config(model_config("qwen3-30b-a3b.json"), with_dtype("fp8_w8a8"));
  EXPECT_EQ(pt.dtype, Dtype::fp8_w8a8);
  EXPECT_FALSE(pt.block_shape.has_value());
  ModelOptions o = with_dtype("fp8_w8a8");
  o.block_shape = Block{128, 128};
  EXPECT_EQ(parse_hf_config(model_config("qwen3-30b-a3b.json"), o).block_shape, (Block{128, 128}));
  // An fp8 block model keeps its block shape.
  EXPECT_EQ(parse_hf_config(model_config("kimi-k2-instruct.json"), with_dtype("fp8")).block_shape,
            (Block{128, 128}));
}

TEST(Precision, BlockShapeOverridesTheConfigs) {
  ModelOptions o;
  o.block_shape = Block{64, 128};
  EXPECT_EQ(parse_hf_config(model_config("deepseek-v3.json"), o).block_shape, (Block{64, 128}));
  // Per-tensor fp8 in the config becomes block-wise.
  EXPECT_EQ(parse_hf_config(tiny({{"quant_method", "fp8"}}), o).block_shape, (Block{64, 128}));
}

TEST(Precision, BlockShapeOnSixteenBitIsRefused) {
  ModelOptions o;
  o.block_shape = Block{128, 128};
  InputError e = input_error([&] { parse_hf_config(tiny(), o); });
  EXPECT_EQ(e.field(), "block-shape");
  EXPECT_EQ(e.value(), "128,128");
  o.dtype = "bf16";
  EXPECT_EQ(input_error([&] { parse_hf_config(model_config("deepseek-v3.json"), o); }).field(),
            "block-shape");
  o = {};
  o.block_shape = Block{0, 128};
  EXPECT_EQ(input_error([&] { parse_hf_config(model_config("deepseek-v3.json"), o); }).field(),
            "block-shape");
}

TEST(Precision, UnknownDtypeOption) {
  const InputError e = input_error([&] { parse_hf_config(tiny(), with_dtype("int8")); });
  EXPECT_EQ(e.field(), "dtype");
  EXPECT_EQ(e.value(), "int8");
}

TEST(Precision, GptOssMxfp4RefusedByName) {
  const InputError e = input_error([&] { parse_hf_config(model_config("gpt-oss-120b.json"), {}); });
  EXPECT_EQ(e.field(), "quantization");
  EXPECT_EQ(e.value(), "mxfp4");
  EXPECT_TRUE(contains(e.what(), "mxfp4"));
  EXPECT_TRUE(contains(e.what(), "--dtype bf16"));
}

TEST(Precision, UnsupportedMethodsRefusedByName) {
  for (const char* method : {"awq", "gptq", "bitsandbytes", "compressed-tensors", "fbgemm_fp8",
                             "int4", "something-new"}) {
    const InputError e = input_error([&] {
      parse_hf_config(tiny({{"quant_method", method}}), {});
    });
    EXPECT_EQ(e.field(), "quantization") << method;
    EXPECT_EQ(e.value(), method);
    EXPECT_TRUE(contains(e.what(), "--dtype bf16")) << e.what();
  }
  EXPECT_EQ(input_error([&] { parse_hf_config(tiny({{"bits", 4}}), {}); }).value(), "unknown");
  json c = tiny();
  c["compression_config"] = {{"format", "pack-quantized"}};
  EXPECT_EQ(input_error([&] { parse_hf_config(c, {}); }).value(), "compressed-tensors");
  EXPECT_EQ(input_error([&] {
              parse_hf_config(tiny({{"quant_method", "fp8"}, {"fmt", "e5m2"}}), {});
            }).value(),
            "fp8 e5m2");
}

TEST(Precision, ModeloptInConfig) {
  const MoeShape fp8 =
      parse_hf_config(tiny({{"quant_method", "modelopt"}, {"quant_algo", "FP8"}}), {});
  EXPECT_EQ(fp8.dtype, Dtype::fp8_w8a8);
  EXPECT_FALSE(fp8.block_shape.has_value());
  const InputError e = input_error([&] {
    parse_hf_config(tiny({{"quant_method", "modelopt"}, {"quant_algo", "NVFP4"}}), {});
  });
  EXPECT_EQ(e.value(), "NVFP4");
  EXPECT_TRUE(contains(e.what(), "NVFP4 quantization is not run"));
  // Only the KV cache quantized: the weights are 16-bit.
  EXPECT_EQ(
      parse_hf_config(tiny({{"quant_method", "modelopt"}, {"quant_algo", nullptr}}), {}).dtype,
      Dtype::bf16);
}

TEST(Precision, MalformedQuantizationFields) {
  EXPECT_EQ(input_error([&] {
              parse_hf_config(tiny({{"quant_method", "fp8"}, {"weight_block_size", {128}}}), {});
            }).field(),
            "quantization_config.weight_block_size");
  EXPECT_EQ(
      input_error([&] {
        parse_hf_config(tiny({{"quant_method", "fp8"}, {"weight_block_size", {128, -1}}}), {});
      }).field(),
      "quantization_config.weight_block_size[1]");
  EXPECT_EQ(input_error([&] { parse_hf_config(tiny("fp8"), {}); }).field(), "quantization_config");
  EXPECT_EQ(input_error([&] {
              parse_hf_config(tiny({{"quant_method", 8}}), {});
            }).field(),
            "quantization_config.quant_method");
}

}  // namespace
}  // namespace moetune
