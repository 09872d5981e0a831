// The preset configs of src/model/presets/, embedded at build time (embed_presets.cmake), so
// that the binary never reads them from disk.
#pragma once
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace moetune::model {

struct EmbeddedPreset {
  std::string_view name;  // the file name without .json, e.g. "deepseek-v3"
  std::string_view json;  // the config.json text, verbatim
};

// In file-name order.
std::span<const EmbeddedPreset> embedded_presets();

// The preset's name for `name`: lowercased, with full Hugging Face names ("mixtral-8x7b-v0.1")
// mapped to the short ones; nullopt when no preset matches.
std::optional<std::string> canonical_preset(std::string_view name);

// The dtype a preset implies when --dtype is auto (e.g. gpt-oss, whose mxfp4 the kernels do
// not run, is analysed as bf16); nullptr when the config decides.
const char* preset_default_dtype(std::string_view name);

}  // namespace moetune::model
