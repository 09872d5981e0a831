#include "model/routing.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <string_view>

#include <fmt/format.h>

#include "moetune/error.hpp"

namespace moetune::model {
namespace {

// Routers whose config.json has no `scoring_func`, by `architectures[0]`. Sigmoid scores with a
// per-expert correction bias in the selection (e_score_correction_bias): transformers'
// Glm4MoeTopkRouter; vLLM's and SGLang's glm4_moe pass scoring "sigmoid" and the bias.
constexpr std::array<std::string_view, 2> kSigmoidBiasRouters = {
    "Glm4MoeForCausalLM", "Glm4vMoeForConditionalGeneration"};
// Softmax over the experts (or over the chosen top-k, the same weights once renormalized).
constexpr std::array<std::string_view, 12> kSoftmaxRouters = {
    "DbrxForCausalLM",      "DeepseekV2ForCausalLM", "GptOssForCausalLM",
    "GraniteMoeForCausalLM", "MixtralForCausalLM",   "OlmoeForCausalLM",
    "Qwen2MoeForCausalLM",  "Qwen3MoeForCausalLM",   "Qwen3NextForCausalLM",
    "Qwen3VLMoeForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
    "Qwen3_5MoeForCausalLM"};

bool one_of(std::string_view name, auto const& list) {
  return std::find(list.begin(), list.end(), name) != list.end();
}

// The scoring of a config without `scoring_func`, and the note saying why.
void scoring_from_architecture(Routing& r, const std::string& architecture) {
  if (one_of(architecture, kSigmoidBiasRouters)) {
    r.scoring = "sigmoid";
    r.correction_bias = true;
    r.note = architecture + "'s router: sigmoid with a correction bias; config.json does not name it";
  } else if (architecture.rfind("Llama4", 0) == 0) {
    r.note = "Llama 4 scales each token's input by sigmoid(router logit) before its expert; "
             "moetune weights the expert's output (times and tables are the same, outputs are not)";
  } else if (!architecture.empty() && !one_of(architecture, kSoftmaxRouters)) {
    r.note = "softmax assumed: config.json names no scoring_func and moetune does not know " +
             architecture + "'s router";
  }
}

}  // namespace

Routing read_routing(const ConfigView& view, int experts_global, int topk,
                     const std::string& architecture) {
  Routing r;
  std::optional<Field> n_group_field;
  if (auto f = view.find({"scoring_func"}); !f) {
    scoring_from_architecture(r, architecture);
  } else {
    r.scoring = read_string(*f, view);
    std::transform(r.scoring.begin(), r.scoring.end(), r.scoring.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    if (r.scoring != "softmax" && r.scoring != "sigmoid") {
      throw InputError(f->path, r.scoring,
                       fmt::format("unknown scoring function in {}; moetune routes with softmax "
                                   "or sigmoid",
                                   view.label()));
    }
  }
  if (auto f = view.find({"norm_topk_prob"})) r.renormalize = read_bool(*f, view);
  if ((n_group_field = view.find({"n_group"}))) r.n_group = read_positive(*n_group_field, view);
  if (auto f = view.find({"topk_group"})) r.topk_group = read_positive(*f, view);
  if (auto f = view.find({"routed_scaling_factor"})) {
    r.routed_scaling_factor = read_number(*f, view);
    if (!(r.routed_scaling_factor > 0)) {
      throw InputError(f->path, value_text(*f->value),
                       fmt::format("must be positive (in {})", view.label()));
    }
  }
  if (auto f = view.find({"topk_method"})) r.correction_bias = read_string(*f, view) == "noaux_tc";
  // (A Glm4Moe config names no topk_method: its bias stays, from the architecture above.)

  if (experts_global % r.n_group != 0) {
    throw InputError(n_group_field ? n_group_field->path : "n_group", std::to_string(r.n_group),
                     fmt::format("{} experts do not split into {} groups (in {})", experts_global,
                                 r.n_group, view.label()));
  }
  if (r.topk_group > r.n_group) {
    throw InputError("topk_group", std::to_string(r.topk_group),
                     fmt::format("exceeds n_group {} (in {})", r.n_group, view.label()));
  }
  if (r.topk_group * (experts_global / r.n_group) < topk) {
    throw InputError("topk_group", std::to_string(r.topk_group),
                     fmt::format("{} of {} groups hold fewer than topk {} experts (in {})",
                                 r.topk_group, r.n_group, topk, view.label()));
  }
  return r;
}

}  // namespace moetune::model
