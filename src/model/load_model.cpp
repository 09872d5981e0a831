// load_model: a config file, a model folder, or an embedded preset -> MoeShape.
#include <algorithm>
#include <cctype>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "model/config_view.hpp"
#include "model/edit_distance.hpp"
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
  return parse_text(model::read_json_file_text(path, "model"), path.string());
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

// The presets a name may have meant: those it starts (qwen3-30b), those that start it
// (deepseek-v3.1, qwen3-30b-a3b-instruct), else those within 2 edits (deepsek-v3, deepseek_v3);
// case and '_' for '-' aside.
std::vector<std::string> presets_near(std::string name) {
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) {
    return c == '_' ? '-' : static_cast<char>(std::tolower(c));
  });
  if (const auto exact = model::canonical_preset(name)) return {*exact};
  std::vector<std::string> out;
  for (const std::string& p : preset_names()) {
    if (name.size() >= 3 && p.rfind(name, 0) == 0) out.push_back(p);
  }
  if (out.empty()) {  // the longest preset the name starts with
    for (const std::string& p : preset_names()) {
      if (name.size() > p.size() && name.rfind(p, 0) == 0 &&
          (out.empty() || p.size() > out.front().size()))
        out = {p};
    }
  }
  if (out.empty() && name.size() >= 4) {
    for (const std::string& p : preset_names()) {
      if (edit_distance(name, p) <= 2) out.push_back(p);
    }
  }
  return out;
}

// What a --model that names nothing gets told. A path (a '/' or a .json name) gets no preset
// list: its last part may still name a preset (deepseek-ai/DeepSeek-V3 -> deepseek-v3), and an
// "org/name" id is said not to be downloaded. A name gets the presets near it, else the list.
std::string missing_model_text(const std::string& value) {
  if (value.empty()) return "empty: name a config.json, a folder holding one, or a preset";
  std::string lower = value;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const bool json_name = lower.size() > 5 && lower.compare(lower.size() - 5, 5, ".json") == 0;
  const std::size_t slash = value.find_first_of("/\\");
  if (slash != std::string::npos || json_name) {
    std::string text = "no such file or folder";
    const bool hub_id = slash != std::string::npos && slash > 0 && slash + 1 < value.size() &&
                        value[0] != '.' &&
                        value.find_first_of("/\\", slash + 1) == std::string::npos && !json_name;
    if (hub_id)
      text += " (Hugging Face ids are not downloaded: give the folder holding its config.json)";
    std::string last = value;  // the last part of the path, without trailing separators
    while (!last.empty() && (last.back() == '/' || last.back() == '\\')) last.pop_back();
    const std::size_t cut = last.find_last_of("/\\");
    if (cut != std::string::npos) last = last.substr(cut + 1);
    const std::vector<std::string> near =
        json_name ? std::vector<std::string>{} : presets_near(last);
    if (!near.empty())
      text += fmt::format("; {}: {}", near.size() == 1 ? "a preset" : "presets",
                          fmt::join(near, " or "));
    return text;
  }
  const std::vector<std::string> near = presets_near(value);
  if (!near.empty())
    return fmt::format("no such file, folder or preset; did you mean {}?", fmt::join(near, " or "));
  return fmt::format("no such file, folder or preset; presets: {}",
                     fmt::join(preset_names(), ", "));
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
