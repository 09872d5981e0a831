#include "model/layers.hpp"

#include <algorithm>
#include <functional>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "moetune/error.hpp"

namespace moetune::model {
namespace {

using LayerRule = std::function<bool(int)>;

[[noreturn]] void bad_rule(const Field& f, const ConfigView& view, std::string_view expected) {
  throw InputError(f.path, value_text(*f.value),
                   fmt::format("must be {} (in {})", expected, view.label()));
}

// A list of layer indices; entries must be non-negative integers.
std::set<int> read_index_list(const Field& f, const ConfigView& view) {
  if (!f.value->is_array()) bad_rule(f, view, "a list of layer indices");
  std::set<int> out;
  for (std::size_t j = 0; j < f.value->size(); ++j) {
    out.insert(read_count(Field{fmt::format("{}[{}]", f.path, j), &(*f.value)[j]}, view));
  }
  return out;
}

// moe_layer_freq: an integer (DeepSeek: i % f == 0) or one 0/1 flag per layer.
LayerRule read_freq(const Field& f, const ConfigView& view, int num_layers) {
  if (!f.value->is_array()) {
    const int freq = read_positive(f, view);
    return [freq](int i) { return i % freq == 0; };
  }
  if (static_cast<int>(f.value->size()) != num_layers) {
    bad_rule(f, view, fmt::format("an integer or one 0/1 flag per layer ({})", num_layers));
  }
  std::vector<bool> flags;
  for (const auto& v : *f.value) {
    if (!v.is_number_integer() || (v.get<long long>() != 0 && v.get<long long>() != 1)) {
      bad_rule(f, view, "an integer or a list of 0/1 flags");
    }
    flags.push_back(v.get<long long>() == 1);
  }
  return [flags](int i) { return flags[static_cast<std::size_t>(i)]; };
}

// moe_layer_start_index / moe_layer_end_index: a layer index (-1 for the end: the last layer),
// or one per modality (ERNIE-4.5-VL), where the text layers span the widest range.
int read_bound(const Field& f, const ConfigView& view, int num_layers, bool is_end) {
  const auto one = [&](const Field& item) {
    if (is_end && item.value->is_number_integer() && item.value->get<long long>() == -1) {
      return num_layers - 1;
    }
    return read_count(item, view);
  };
  if (!f.value->is_array() || f.value->empty()) return one(f);
  int bound = is_end ? 0 : num_layers;
  for (std::size_t j = 0; j < f.value->size(); ++j) {
    const int b = one(Field{fmt::format("{}[{}]", f.path, j), &(*f.value)[j]});
    bound = is_end ? std::max(bound, b) : std::min(bound, b);
  }
  return bound;
}

std::vector<LayerRule> read_rules(const ConfigView& view, int num_layers) {
  std::vector<LayerRule> rules;
  if (auto f = view.find({"first_k_dense_replace"})) {
    const int k = read_count(*f, view);
    rules.emplace_back([k](int i) { return i >= k; });
  }
  if (auto f = view.find({"moe_layer_freq"})) rules.push_back(read_freq(*f, view, num_layers));
  for (const auto name : {"decoder_sparse_step", "interleave_moe_layer_step"}) {
    if (auto f = view.find({name})) {
      const int step = read_positive(*f, view);
      rules.emplace_back([step](int i) { return (i + 1) % step == 0; });
    }
  }
  if (auto f = view.find({"mlp_only_layers"})) {
    rules.emplace_back([dense = read_index_list(*f, view)](int i) { return !dense.contains(i); });
  }
  if (auto f = view.find({"moe_layers"})) {
    rules.emplace_back([moe = read_index_list(*f, view)](int i) { return moe.contains(i); });
  }
  const auto start = view.find({"moe_layer_start_index"});
  const auto end = view.find({"moe_layer_end_index"});
  const auto interval = view.find({"moe_layer_interval"});
  if (start || end || interval) {
    const int a = start ? read_bound(*start, view, num_layers, false) : 0;
    const int b = end ? read_bound(*end, view, num_layers, true) : num_layers - 1;
    const int v = interval ? read_positive(*interval, view) : 1;
    rules.emplace_back([a, b, v](int i) { return i >= a && i <= b && (i + 1) % v == 0; });
  }
  return rules;
}

}  // namespace

LayerCount count_moe_layers(const ConfigView& view) {
  const auto layers = view.find({"num_hidden_layers", "n_layers", "num_layers"});
  if (!layers) return {};
  LayerCount count;
  count.num_layers = read_positive(*layers, view);
  // Layers are counted one by one; a value no model has (2^31 - 1) would take minutes.
  constexpr int kMaxLayers = 1'000'000;
  if (count.num_layers > kMaxLayers) {
    throw InputError(layers->path, std::to_string(count.num_layers),
                     fmt::format("more than {} layers (in {})", kMaxLayers, view.label()));
  }
  const auto rules = read_rules(view, count.num_layers);
  for (int i = 0; i < count.num_layers; ++i) {
    bool moe = true;
    for (const auto& rule : rules) moe = moe && rule(i);
    count.moe_layers += moe ? 1 : 0;
  }
  if (count.moe_layers == 0) {
    throw InputError(layers->path, std::to_string(count.num_layers),
                     fmt::format("the layer rules of {} leave no MoE layer", view.label()));
  }
  return count;
}

}  // namespace moetune::model
