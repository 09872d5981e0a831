#include "model/routing.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "moetune/error.hpp"

namespace moetune::model {

Routing read_routing(const ConfigView& view, int experts_global, int topk) {
  Routing r;
  std::optional<Field> n_group_field;
  if (auto f = view.find({"scoring_func"})) {
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
