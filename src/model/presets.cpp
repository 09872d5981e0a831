// The embedded presets: names, config text, and the dtype a preset implies.
#include <algorithm>
#include <cctype>

#include "model/presets_embedded.hpp"
#include "moetune/model.hpp"

namespace moetune {
namespace model {

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
  std::string key = name;  // names are lowercase; accept any case
  std::transform(key.begin(), key.end(), key.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  for (const auto& p : model::embedded_presets()) {
    if (p.name == key) return std::string(p.json);
  }
  return std::nullopt;
}

}  // namespace moetune
