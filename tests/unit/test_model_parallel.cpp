// TP/EP split and its refusals: N by tp, E by ep, fp8 blocks by the per-rank N and K.
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

ModelOptions par(int tp, int ep) {
  ModelOptions o;
  o.tp = tp;
  o.ep = ep;
  return o;
}

TEST(Parallel, SplitsNByTpAndEByEp) {
  const MoeShape s = parse_hf_config(model_config("deepseek-v3.json"), par(4, 8));
  EXPECT_EQ(s.tp, 4);
  EXPECT_EQ(s.ep, 8);
  EXPECT_EQ(s.N, 512);
  EXPECT_EQ(s.E, 32);
  EXPECT_EQ(s.E_global, 256);
  EXPECT_EQ(s.K, 7168);  // never split
  EXPECT_EQ(s.topk, 8);  // model-wide
}

// TP and EP together multiply (tp x ep ranks): the shape says so, and how SGLang's and vLLM's
// flags of the same names map, because `--tp 8 --ep 8` there means 8 ranks. One of them alone
// needs no note.
TEST(Parallel, TpTimesEpIsNoted) {
  const MoeShape both = parse_hf_config(model_config("deepseek-v3.json"), par(8, 8));
  EXPECT_EQ(both.N, 256);
  EXPECT_EQ(both.E, 32);
  EXPECT_EQ(parallel_note(both),
            "--tp 8 and --ep 8 split one layer over 64 ranks (intermediate / 8, experts / 8); "
            "SGLang's --tp 8 --ep-size 8 is --tp 1 --ep 8 here; vLLM's tensor parallel size 8 "
            "with expert parallelism is --ep 8 alone");
  const MoeShape odd = parse_hf_config(model_config("deepseek-v3.json"), par(4, 8));
  EXPECT_EQ(parallel_note(odd).find("SGLang"), std::string::npos);  // 8 does not divide 4
  EXPECT_NE(parallel_note(odd).find("32 ranks"), std::string::npos);
  // vLLM's mapping (--ep T alone) only where T divides the experts: Mixtral's 8 by 16 does not.
  const MoeShape mixtral = parse_hf_config(model_config("mixtral-8x7b-v0.1.json"), par(16, 2));
  EXPECT_NE(parallel_note(mixtral).find("--tp 8 --ep 2 here"), std::string::npos);
  EXPECT_EQ(parallel_note(mixtral).find("vLLM"), std::string::npos);
  EXPECT_TRUE(parallel_note(parse_hf_config(model_config("deepseek-v3.json"), par(8, 1))).empty());
  EXPECT_TRUE(parallel_note(parse_hf_config(model_config("deepseek-v3.json"), par(1, 8))).empty());
}

TEST(Parallel, TpMustDivideTheExpertSize) {
  const InputError e =
      input_error([] { parse_hf_config(model_config("qwen3-30b-a3b.json"), par(5, 1)); });
  EXPECT_EQ(e.field(), "tp");
  EXPECT_EQ(e.value(), "5");
  EXPECT_EQ(e.reason(), "moe_intermediate_size 768 is not divisible by --tp 5");
}

TEST(Parallel, EpMustDivideTheExperts) {
  const InputError e =
      input_error([] { parse_hf_config(model_config("qwen3-30b-a3b.json"), par(1, 3)); });
  EXPECT_EQ(e.field(), "ep");
  EXPECT_EQ(e.value(), "3");
  EXPECT_NE(e.reason().find("128"), std::string::npos) << e.reason();
  EXPECT_NE(e.reason().find("--ep 3"), std::string::npos) << e.reason();
}

TEST(Parallel, TpAndEpAtLeastOne) {
  EXPECT_EQ(
      input_error([] { parse_hf_config(model_config("qwen3-30b-a3b.json"), par(0, 1)); }).field(),
      "tp");
  EXPECT_EQ(
      input_error([] { parse_hf_config(model_config("qwen3-30b-a3b.json"), par(1, -2)); }).field(),
      "ep");
}

TEST(Parallel, Fp8BlockMustDivideTheRankN) {
  // 1536 / 8 = 192: not a multiple of the 128-wide block.
  const InputError e =
      input_error([] { parse_hf_config(model_config("qwen3-235b-a22b-fp8.json"), par(8, 1)); });
  EXPECT_EQ(e.field(), "tp");
  EXPECT_EQ(e.value(), "8");
  EXPECT_NE(e.reason().find("192"), std::string::npos);
  EXPECT_NE(e.reason().find("128"), std::string::npos);
  // TP 4 gives 384 = 3 * 128: fine.
  EXPECT_EQ(parse_hf_config(model_config("qwen3-235b-a22b-fp8.json"), par(4, 1)).N, 384);
  // The same model as bf16 splits by 8.
  ModelOptions bf16 = par(8, 1);
  bf16.dtype = "bf16";
  EXPECT_EQ(parse_hf_config(model_config("qwen3-235b-a22b-fp8.json"), bf16).N, 192);
}

TEST(Parallel, Fp8BlockMustDivideNAndKWithoutTp) {
  ModelOptions o;
  o.dtype = "fp8_w8a8";
  o.block_shape = std::array<int, 2>{128, 128};
  // gpt-oss: N = K = 2880 = 22.5 * 128.
  const InputError n = input_error([&] { parse_hf_config(model_config("gpt-oss-20b.json"), o); });
  EXPECT_EQ(n.field(), "block-shape");
  EXPECT_NE(n.reason().find("2880"), std::string::npos);
  o.block_shape = std::array<int, 2>{64, 128};  // N 2880 = 45 * 64, K still not
  const InputError k = input_error([&] { parse_hf_config(model_config("gpt-oss-20b.json"), o); });
  EXPECT_EQ(k.field(), "block-shape");
  EXPECT_EQ(k.value(), "64,128");
  EXPECT_NE(k.reason().find("K 2880"), std::string::npos) << k.reason();
}

// With TP, the split is blamed only when the whole size divides; an overridden size or the
// block otherwise (what the user can change).
TEST(Parallel, Fp8BlockRefusalNamesWhatTheUserCanChange) {
  ModelOptions o = par(4, 1);
  o.block_shape = std::array<int, 2>{100, 128};  // 1536 % 100 != 0: the block, not --tp
  const InputError b =
      input_error([&] { parse_hf_config(model_config("qwen3-235b-a22b-fp8.json"), o); });
  EXPECT_EQ(b.field(), "block-shape");
  EXPECT_EQ(b.value(), "100,128");
  o = par(4, 1);
  o.intermediate = 100;  // --intermediate 100 (N 25 at TP 4): the override
  const InputError i =
      input_error([&] { parse_hf_config(model_config("qwen3-235b-a22b-fp8.json"), o); });
  EXPECT_EQ(i.field(), "intermediate");
  EXPECT_EQ(i.value(), "100");
  o = par(4, 1);
  o.hidden = 100;  // --hidden 100: K not divisible by block_k 128, the override is to blame
  const InputError h =
      input_error([&] { parse_hf_config(model_config("qwen3-235b-a22b-fp8.json"), o); });
  EXPECT_EQ(h.field(), "hidden");
  EXPECT_EQ(h.value(), "100");
}

}  // namespace
}  // namespace moetune
