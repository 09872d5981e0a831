// The embedded presets: names, aliases, config text, and the dtype a preset implies.
#include <algorithm>
#include <cctype>
#include <utility>

#include "model/presets_embedded.hpp"
#include "moetune/model.hpp"

namespace moetune {
namespace model {
namespace {

// The full Hugging Face names of presets whose short name drops a suffix.
constexpr std::pair<std::string_view, std::string_view> kAliases[] = {
    {"mixtral-8x7b-v0.1", "mixtral-8x7b"},
    {"mixtral-8x22b-v0.1", "mixtral-8x22b"},
    {"llama-4-scout-17b-16e-instruct", "llama-4-scout"},
    {"olmoe-1b-7b-0924", "olmoe-1b-7b"},
    {"granite-3.0-3b-a800m-base", "granite-3.0-3b-a800m"},
    {"qwen3-vl-30b-a3b-instruct", "qwen3-vl-30b-a3b"},
};

const EmbeddedPreset* find_embedded(std::string_view name) {
  for (const auto& p : embedded_presets()) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

}  // namespace

std::optional<std::string> canonical_preset(std::string_view name) {
  std::string key(name);  // names are lowercase; accept any case
  std::transform(key.begin(), key.end(), key.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  for (const auto& [alias, target] : kAliases) {
    if (key == alias) key = target;
  }
  if (find_embedded(key) == nullptr) return std::nullopt;
  return key;
}

const char* preset_default_dtype(std::string_view name) {
  // gpt-oss ships mxfp4 weights, which the kernels do not run: its presets analyse it as bf16.
  if (name == "gpt-oss-120b" || name == "gpt-oss-20b") return "bf16";
  return nullptr;
}

}  // namespace model

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const auto& p : model::embedded_presets()) names.emplace_back(p.name);
  std::sort(names.begin(), names.end());  // files sort by "name.json": "-fp8" after "."
  return names;
}

std::optional<std::string> preset_json(const std::string& name) {
  const auto key = model::canonical_preset(name);
  if (!key) return std::nullopt;
  for (const auto& p : model::embedded_presets()) {
    if (p.name == *key) return std::string(p.json);
  }
  return std::nullopt;
}

}  // namespace moetune
