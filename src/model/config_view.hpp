// A read-only view of an HF config.json that finds a field wherever a family puts it. Multimodal
// and wrapper configs nest the language model's fields (text_config, language_config, ...) while
// a few fields (architectures, quantization_config, dtype) stay at the top level.
#pragma once
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace moetune::model {

// A field found in the config: its path as written in the file ("text_config.hidden_size") and
// its value (never null: a JSON null counts as absent).
struct Field {
  std::string path;
  const nlohmann::json* value = nullptr;
};

class ConfigView {
 public:
  // `label` names the config in error messages (a file path or preset name).
  ConfigView(const nlohmann::json& top, std::string label);

  // The first of `names` present in the nested text config, else at the top level. A dotted
  // name ("ffn_config.moe_top_k") walks into sub-objects.
  std::optional<Field> find(std::span<const std::string_view> names) const;
  std::optional<Field> find(std::initializer_list<std::string_view> names) const {
    return find(std::span(names.begin(), names.size()));
  }
  // The same with the top level searched first (architectures, quantization_config, dtype).
  std::optional<Field> find_top_first(std::initializer_list<std::string_view> names) const;

  const std::string& label() const { return label_; }

 private:
  std::optional<Field> find_in(const nlohmann::json& scope, const std::string& prefix,
                               std::span<const std::string_view> names) const;

  const nlohmann::json& top_;
  const nlohmann::json* text_ = nullptr;  // the nested text config, if any
  std::string text_prefix_;               // its path, e.g. "text_config."
  std::string label_;
};

// Field readers. Each throws InputError(field path, value, reason) when the value has the
// wrong type or range, so the user sees the JSON field at fault.

// A non-negative integer. Per-layer lists of one repeated value (some families write
// `moe_topk: [8, 8, ...]`) read as that value.
int read_count(const Field& f, const ConfigView& view);
// As read_count, and > 0.
int read_positive(const Field& f, const ConfigView& view);
// A number (integer or floating point).
double read_number(const Field& f, const ConfigView& view);
bool read_bool(const Field& f, const ConfigView& view);
std::string read_string(const Field& f, const ConfigView& view);

// A JSON value as a short text for messages: strings unquoted, everything else as JSON.
std::string value_text(const nlohmann::json& v);
// A JSON value as compact JSON (strings quoted), cut to about 60 characters with "...". Unlike
// json::dump it never recurses deeper than a few levels, so a hostile, deeply nested value (the
// parser accepts any depth) cannot overflow the stack.
std::string json_excerpt(const nlohmann::json& v);

}  // namespace moetune::model
