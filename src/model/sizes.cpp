#include "model/sizes.hpp"

#include <array>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "moetune/error.hpp"

namespace moetune::model {
namespace {

// Synonyms, as DESIGN.md lists them; a new family's spelling goes here.
constexpr std::array<std::string_view, 5> kExpertNames = {"num_experts", "n_routed_experts",
                                                          "num_local_experts", "moe_num_experts",
                                                          "ffn_config.moe_num_experts"};
constexpr std::array<std::string_view, 6> kTopkNames = {
    "num_experts_per_tok", "experts_per_token", "top_k_experts", "moe_k", "moe_topk",
    "ffn_config.moe_top_k"};
// An order of preference, not synonyms: families with dense layers also carry intermediate_size.
constexpr std::array<std::string_view, 3> kIntermediateNames = {
    "moe_intermediate_size", "ffn_config.ffn_hidden_size", "intermediate_size"};
constexpr std::array<std::string_view, 2> kHiddenNames = {"hidden_size", "d_model"};

// An override: validated here because ModelOptions may come from code as well as the CLI.
Size from_override(int value, const char* name) {
  if (value <= 0) {
    throw InputError(name, std::to_string(value), "must be a positive integer");
  }
  return {value, fmt::format("--{}", name)};
}

[[noreturn]] void missing(std::span<const std::string_view> names, const ConfigView& view,
                          std::string_view what, std::string_view flag) {
  throw InputError(std::string(names.front()), "(missing)",
                   fmt::format("no {} in {} (looked for {}); pass --{}", what, view.label(),
                               fmt::join(names, ", "), flag));
}

// The first of `names` present; every other one present must say the same (a config that gives
// num_experts 16 and num_local_experts 8 is ambiguous, not "the first wins").
std::optional<Field> find_agreeing(std::span<const std::string_view> names,
                                   const ConfigView& view, std::string_view flag) {
  std::optional<Field> first;
  for (const auto name : names) {
    const auto f = view.find({name});
    if (!f) continue;
    if (!first) {
      first = f;
    } else if (read_count(*f, view) != read_count(*first, view)) {
      throw InputError(f->path, std::to_string(read_count(*f, view)),
                       fmt::format("disagrees with {} = {} (both name the same count, in {}); "
                                   "pass --{}",
                                   first->path, read_count(*first, view), view.label(), flag));
    }
  }
  return first;
}

Size read_experts(const ConfigView& view, const ModelOptions& opts) {
  Size s;
  if (opts.experts) {
    s = from_override(*opts.experts, "experts");
  } else if (auto f = find_agreeing(kExpertNames, view, "experts")) {
    s = {read_count(*f, view), f->path};
  } else {
    throw InputError("model", view.label(),
                     fmt::format("not a MoE model (no expert count: none of {})",
                                 fmt::join(kExpertNames, ", ")));
  }
  if (s.value <= 1) {
    throw InputError(
        "model", view.label(),
        fmt::format("not a MoE model (no expert count above 1: {} is {})", s.from, s.value));
  }
  return s;
}

Size read_topk(const ConfigView& view, const ModelOptions& opts) {
  if (opts.topk) return from_override(*opts.topk, "topk");
  if (auto f = find_agreeing(kTopkNames, view, "topk")) return {read_positive(*f, view), f->path};
  missing(kTopkNames, view, "experts-per-token count", "topk");
}

Size read_intermediate(const ConfigView& view, const ModelOptions& opts) {
  if (opts.intermediate) return from_override(*opts.intermediate, "intermediate");
  for (const auto name : kIntermediateNames) {
    const auto f = view.find({name});
    if (!f) continue;
    // DeepSeek-family configs (first_k_dense_replace) size their dense layers by
    // intermediate_size: without moe_intermediate_size the expert size is unknown (it read as
    // DeepSeek-V3's 18432, the dense layers', before).
    if (name == "intermediate_size") {
      if (const auto dense = view.find({"first_k_dense_replace"}))
        throw InputError("moe_intermediate_size", "(missing)",
                         fmt::format("no expert intermediate size in {}: its intermediate_size "
                                     "is the dense layers' ({} is set); pass --intermediate",
                                     view.label(), dense->path));
    }
    return {read_positive(*f, view), f->path};
  }
  missing(kIntermediateNames, view, "expert intermediate size", "intermediate");
}

Size read_hidden(const ConfigView& view, const ModelOptions& opts) {
  if (opts.hidden) return from_override(*opts.hidden, "hidden");
  if (auto f = view.find(kHiddenNames)) return {read_positive(*f, view), f->path};
  missing(kHiddenNames, view, "hidden size", "hidden");
}

}  // namespace

GlobalSizes read_sizes(const ConfigView& view, const ModelOptions& opts) {
  GlobalSizes s;
  s.experts = read_experts(view, opts);
  s.topk = read_topk(view, opts);
  s.intermediate = read_intermediate(view, opts);
  s.hidden = read_hidden(view, opts);
  if (s.topk.value > s.experts.value) {
    throw InputError(s.topk.from.starts_with("--") ? "topk" : s.topk.from,
                     std::to_string(s.topk.value),
                     fmt::format("experts per token {} exceeds the expert count {} ({})",
                                 s.topk.value, s.experts.value, s.experts.from));
  }
  return s;
}

}  // namespace moetune::model
