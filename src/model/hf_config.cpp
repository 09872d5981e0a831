// parse_hf_config: a config.json object -> MoeShape, field by field (never by architecture).
#include <nlohmann/json.hpp>

#include "model/config_view.hpp"
#include "model/layers.hpp"
#include "model/parallel.hpp"
#include "model/precision.hpp"
#include "model/routing.hpp"
#include "model/sizes.hpp"
#include "moetune/error.hpp"
#include "moetune/model.hpp"

namespace moetune {
namespace {

// `architectures[0]`, kept at the top level by wrappers; "" when absent.
std::string read_architecture(const model::ConfigView& view) {
  const auto f = view.find_top_first({"architectures"});
  if (!f) return "";
  if (f->value->is_string()) return f->value->get<std::string>();
  if (f->value->is_array() && !f->value->empty() && f->value->front().is_string()) {
    return f->value->front().get<std::string>();
  }
  return "";
}

MoeShape parse(const nlohmann::json& config, const ModelOptions& opts, const std::string& label) {
  if (!config.is_object()) {
    throw InputError("model", label, "the config is not a JSON object");
  }
  model::check_parallel_options(opts);
  const model::ConfigView view(config, label);

  MoeShape shape;
  shape.architecture = read_architecture(view);
  const model::GlobalSizes sizes = model::read_sizes(view, opts);
  model::apply_parallel(shape, sizes, opts);
  shape.routing = model::read_routing(view, shape.E_global, shape.topk, shape.architecture);
  const model::LayerCount layers = model::count_moe_layers(view);
  shape.num_layers = layers.num_layers;
  shape.moe_layers = layers.moe_layers;
  const model::Precision precision = model::resolve_precision(view, opts);
  shape.dtype = precision.dtype;
  shape.block_shape = precision.block_shape;
  if (!precision.note.empty()) shape.dtype_note = precision.note;
  model::check_block_divisible(shape, sizes);
  return shape;
}

}  // namespace

MoeShape parse_hf_config(const nlohmann::json& config, const ModelOptions& opts,
                         const std::string& source) {
  const std::string label = source.empty() ? "the config" : source;
  try {
    MoeShape shape = parse(config, opts, label);
    shape.source = source;
    return shape;
  } catch (const nlohmann::json::exception& e) {
    // The readers check types first; this is a last guard so no nlohmann error escapes.
    throw InputError("model", label, std::string("unexpected config content: ") + e.what());
  }
}

}  // namespace moetune
