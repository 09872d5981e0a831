#include "model/routing.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <string_view>

#include <fmt/format.h>

#include "moetune/error.hpp"

namespace moetune::model {
namespace {

// Routers whose config.json names neither scoring function nor bias method, by
// `architectures[0]` (or `model_type` when a config has no architectures). Sigmoid scores with a
// per-expert correction bias in the selection (e_score_correction_bias): transformers'
// Glm4MoeTopkRouter; vLLM's and SGLang's glm4_moe pass scoring "sigmoid" and the bias.
constexpr std::array<std::string_view, 2> kSigmoidBiasRouters = {
    "Glm4MoeForCausalLM", "Glm4vMoeForConditionalGeneration"};
constexpr std::array<std::string_view, 2> kSigmoidBiasModelTypes = {"glm4_moe", "glm4v_moe"};
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

// `model_type` when it is a string ("" otherwise: it only names the router, it is not required).
std::string model_type_of(const ConfigView& view) {
  const auto f = view.find({"model_type"});
  return f && f->value->is_string() ? f->value->get<std::string>() : std::string();
}

}  // namespace

Routing read_routing(const ConfigView& view, int experts_global, int topk,
                     const std::string& architecture) {
  Routing r;
  const std::string model_type = model_type_of(view);
  const std::string router = architecture.empty() ? model_type : architecture;
  const bool sigmoid_bias_router = one_of(architecture, kSigmoidBiasRouters) ||
                                   (architecture.empty() && one_of(model_type, kSigmoidBiasModelTypes));
  std::optional<Field> n_group_field;
  const auto scoring_field = view.find({"scoring_func"});
  if (scoring_field) {
    r.scoring = read_string(*scoring_field, view);
    std::transform(r.scoring.begin(), r.scoring.end(), r.scoring.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    if (r.scoring != "softmax" && r.scoring != "sigmoid") {
      throw InputError(scoring_field->path, r.scoring,
                       fmt::format("unknown scoring function in {}; moetune routes with softmax "
                                   "or sigmoid",
                                   view.label()));
    }
  } else if (sigmoid_bias_router) {
    r.scoring = "sigmoid";
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
  const auto method_field = view.find({"topk_method"});
  if (method_field) {
    r.correction_bias = read_string(*method_field, view) == "noaux_tc";
  } else if (sigmoid_bias_router) {
    r.correction_bias = true;
  }

  // What came from the router's name rather than from config.json, or was assumed.
  if (sigmoid_bias_router && (!scoring_field || !method_field)) {
    const char* what = !scoring_field && !method_field ? "sigmoid scores and a correction bias"
                       : !scoring_field               ? "sigmoid scores"
                                                      : "a correction bias";
    r.note = fmt::format("{}'s router: {}, which config.json does not name", router, what);
  } else if (router.rfind("Llama4", 0) == 0 || router.rfind("llama4", 0) == 0) {
    r.note = "Llama 4 scales each token's input by sigmoid(router logit) before its expert; "
             "moetune weights the expert's output (times and tables are the same, outputs are not)";
  } else if (!scoring_field && !router.empty() && !one_of(architecture, kSoftmaxRouters)) {
    r.note = "softmax assumed: config.json names no scoring_func and moetune does not know " +
             router + "'s router";
  }

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
