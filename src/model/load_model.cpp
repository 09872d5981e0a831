// load_model: a config file, a model folder, or an embedded preset -> MoeShape.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "model/config_view.hpp"
#include "model/json_text.hpp"
#include "model/presets_embedded.hpp"
#include "moetune/error.hpp"
#include "moetune/model.hpp"

namespace moetune {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json parse_text(const std::string& text, const std::string& label) {
  try {
    return model::parse_json_text(text);
  } catch (const model::DuplicateJsonKey& e) {
    throw InputError("model", label, fmt::format("invalid JSON: {}", e.what()));
  } catch (const json::exception& e) {
    // Drop nlohmann's "[json.exception.parse_error.101] " tag: the user needs the position.
    std::string_view what = e.what();
    if (const auto tag = what.find("] "); what.starts_with("[json.") && tag != what.npos) {
      what.remove_prefix(tag + 2);
    }
    throw InputError("model", label, fmt::format("invalid JSON: {}", what));
  }
}

json read_json_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  if (in) text << in.rdbuf();
  if (!in || in.bad()) throw InputError("model", path.string(), "cannot read the file");
  return parse_text(text.str(), path.string());
}

// hf_quant_config.json (modelopt) as the quantization_config that config.json lacks:
// {"quantization": {"quant_algo": "FP8"}} -> {"quant_method": "modelopt", "quant_algo": "FP8"}.
void merge_hf_quant_config(json& config, const fs::path& quant_path) {
  const model::ConfigView view(config, "");
  if (!config.is_object() || view.find_top_first({"quantization_config", "compression_config"})) {
    return;  // config.json's own quantization wins
  }
  const json quant = read_json_file(quant_path);
  const auto it = quant.is_object() ? quant.find("quantization") : quant.end();
  if (it == quant.end() || !it->is_object()) {
    throw InputError("model", quant_path.string(), "no \"quantization\" object");
  }
  const auto algo = it->find("quant_algo");
  config["quantization_config"] = {{"quant_method", "modelopt"},
                                   {"quant_algo", algo == it->end() ? json() : *algo}};
}

bool is_auto(std::string dtype) {
  std::transform(dtype.begin(), dtype.end(), dtype.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return dtype == "auto";
}

MoeShape load_path(const fs::path& path, const ModelOptions& opts) {
  std::error_code ec;
  fs::path config_path = path;
  if (fs::is_directory(path, ec)) {
    config_path = path / "config.json";
    if (!fs::exists(config_path, ec)) {
      throw InputError("model", path.string(), "the folder holds no config.json");
    }
  }
  json config = read_json_file(config_path);
  if (config_path.filename() == "config.json") {
    const fs::path quant_path = config_path.parent_path() / "hf_quant_config.json";
    if (fs::exists(quant_path, ec)) merge_hf_quant_config(config, quant_path);
  }
  return parse_hf_config(config, opts, config_path.string());
}

// What a --model that names nothing gets told: a path (a '/' or a .json name) that does not
// exist is not a misspelt preset, so it gets no list; a preset name that starts one or more
// presets names those (qwen3.5-122b -> the -a10b and -a10b-fp8 presets); else the whole list.
std::string missing_model_text(const std::string& value) {
  const bool path_like = value.find_first_of("/\\") != std::string::npos ||
                         (value.size() > 5 && value.compare(value.size() - 5, 5, ".json") == 0);
  if (path_like) return "no such file or folder";
  std::string key = value;
  std::transform(key.begin(), key.end(), key.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::vector<std::string> started;
  for (const std::string& name : preset_names()) {
    if (key.size() >= 3 && name.rfind(key, 0) == 0) started.push_back(name);
  }
  if (!started.empty())
    return fmt::format("no such file, folder or preset; did you mean {}?",
                       fmt::join(started, " or "));
  return fmt::format("no such file, folder or preset; presets: {}", fmt::join(preset_names(), ", "));
}

}  // namespace

MoeShape load_model(const std::string& path_or_preset, const ModelOptions& opts) {
  std::error_code ec;
  if (!path_or_preset.empty() && fs::exists(fs::path(path_or_preset), ec)) {
    return load_path(fs::path(path_or_preset), opts);
  }
  if (const auto name = model::canonical_preset(path_or_preset)) {
    ModelOptions preset_opts = opts;
    const char* dtype = model::preset_default_dtype(*name);
    const bool preset_dtype = dtype != nullptr && is_auto(opts.dtype);
    if (preset_dtype) preset_opts.dtype = dtype;
    MoeShape shape = parse_hf_config(parse_text(*preset_json(*name), *name), preset_opts, *name);
    if (preset_dtype) {
      shape.dtype_note = fmt::format(
          "the checkpoint's mxfp4 weights are not run by moetune's kernels: the {} preset "
          "analyses them as {}; --dtype chooses another",
          *name, dtype);
    }
    return shape;
  }
  throw InputError("model", path_or_preset, missing_model_text(path_or_preset));
}

}  // namespace moetune
