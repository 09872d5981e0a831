// The routing fields of a config: scoring function, renormalization, grouped top-k.
#pragma once
#include "model/config_view.hpp"
#include "moetune/model.hpp"

namespace moetune::model {

// Defaults when a field is absent: renormalize, one group, scale 1, no bias; the scoring
// function, when `scoring_func` is absent, from the architecture (`architectures[0]`): the
// routers whose config.json does not say (Glm4Moe: sigmoid with correction bias, as
// transformers' Glm4MoeTopkRouter, vLLM and SGLang run it), softmax for the known softmax
// routers, and softmax with a note (Routing::note) for the rest.
// Grouped top-k is checked for consistency: n_group divides the experts, topk_group <= n_group,
// and the kept groups hold at least topk experts.
Routing read_routing(const ConfigView& view, int experts_global, int topk,
                     const std::string& architecture);

}  // namespace moetune::model
