// The routing fields of a config: scoring function, renormalization, grouped top-k.
#pragma once
#include "model/config_view.hpp"
#include "moetune/model.hpp"

namespace moetune::model {

// Defaults when a field is absent: softmax, renormalize, one group, scale 1, no bias.
// Grouped top-k is checked for consistency: n_group divides the experts, topk_group <= n_group,
// and the kept groups hold at least topk experts.
Routing read_routing(const ConfigView& view, int experts_global, int topk);

}  // namespace moetune::model
