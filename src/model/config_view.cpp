#include "model/config_view.hpp"

#include <climits>

#include <fmt/format.h>

#include "moetune/error.hpp"

namespace moetune::model {
namespace {

using nlohmann::json;

// Where wrappers keep the language model's config. Found by key, whatever the architecture.
constexpr std::string_view kTextConfigPaths[] = {"text_config", "language_config", "llm_config",
                                                 "thinker_config.text_config"};

// Walks a dotted path; nullptr when a step is missing, not an object, or the value is null.
const json* walk(const json& scope, std::string_view path) {
  const json* node = &scope;
  while (true) {
    if (!node->is_object()) return nullptr;
    const auto dot = path.find('.');
    const auto it = node->find(std::string(path.substr(0, dot)));
    if (it == node->end()) return nullptr;
    node = &*it;
    if (dot == std::string_view::npos) break;
    path.remove_prefix(dot + 1);
  }
  return node->is_null() ? nullptr : node;
}

// The offending JSON as written (a string keeps its quotes: "4096" is not 4096).
[[noreturn]] void bad_field(const Field& f, const ConfigView& view, std::string_view expected) {
  throw InputError(f.path, json_excerpt(*f.value),
                   fmt::format("must be {} (in {})", expected, view.label()));
}

// One integer, or nullopt if `v` is not an integer that fits an int.
std::optional<long long> as_integer(const json& v) {
  if (!v.is_number_integer()) return std::nullopt;  // excludes floats and booleans
  if (v.is_number_unsigned()) {
    const auto u = v.get<unsigned long long>();
    if (u > static_cast<unsigned long long>(INT_MAX)) return std::nullopt;
    return static_cast<long long>(u);
  }
  const auto i = v.get<long long>();
  if (i < INT_MIN || i > INT_MAX) return std::nullopt;
  return i;
}

}  // namespace

ConfigView::ConfigView(const json& top, std::string label) : top_(top), label_(std::move(label)) {
  for (const auto path : kTextConfigPaths) {
    if (const json* nested = walk(top_, path); nested != nullptr && nested->is_object()) {
      text_ = nested;
      text_prefix_ = std::string(path) + ".";
      break;
    }
  }
}

std::optional<Field> ConfigView::find_in(const json& scope, const std::string& prefix,
                                         std::span<const std::string_view> names) const {
  for (const auto name : names) {
    if (const json* v = walk(scope, name)) return Field{prefix + std::string(name), v};
  }
  return std::nullopt;
}

std::optional<Field> ConfigView::find(std::span<const std::string_view> names) const {
  if (text_ != nullptr) {
    if (auto f = find_in(*text_, text_prefix_, names)) return f;
  }
  return find_in(top_, "", names);
}

std::optional<Field> ConfigView::find_top_first(
    std::initializer_list<std::string_view> names) const {
  const std::span<const std::string_view> list(names.begin(), names.size());
  if (auto f = find_in(top_, "", list)) return f;
  if (text_ != nullptr) return find_in(*text_, text_prefix_, list);
  return std::nullopt;
}

int read_count(const Field& f, const ConfigView& view) {
  const json& v = *f.value;
  std::optional<long long> n = as_integer(v);
  if (v.is_array() && !v.empty()) {
    n = as_integer(v.front());
    for (const auto& item : v) {
      if (as_integer(item) != n) {
        bad_field(f, view, "a non-negative integer below 2^31 (or a list of one)");
      }
    }
  }
  if (!n || *n < 0) bad_field(f, view, "a non-negative integer below 2^31");
  return static_cast<int>(*n);
}

int read_positive(const Field& f, const ConfigView& view) {
  const int n = read_count(f, view);
  if (n <= 0) bad_field(f, view, "a positive integer");
  return n;
}

double read_number(const Field& f, const ConfigView& view) {
  if (!f.value->is_number()) bad_field(f, view, "a number");
  return f.value->get<double>();
}

bool read_bool(const Field& f, const ConfigView& view) {
  if (!f.value->is_boolean()) bad_field(f, view, "true or false");
  return f.value->get<bool>();
}

std::string read_string(const Field& f, const ConfigView& view) {
  if (!f.value->is_string()) bad_field(f, view, "a string");
  return f.value->get<std::string>();
}

namespace {

constexpr std::size_t kMaxChars = 60;  // one stderr line, not a dump of a sub-object
constexpr int kMaxDepth = 8;           // deeper containers print as [...] / {...}

// Compact JSON as json::dump writes it, stopping once `out` passes kMaxChars (the caller cuts).
void append_excerpt(const json& v, int depth, std::string& out) {
  if (!v.is_structured()) {
    out += v.dump();
    return;
  }
  const bool array = v.is_array();
  if (v.empty() || depth >= kMaxDepth) {
    out += array ? (v.empty() ? "[]" : "[...]") : (v.empty() ? "{}" : "{...}");
    return;
  }
  out += array ? '[' : '{';
  bool first = true;
  for (auto it = v.begin(); it != v.end() && out.size() <= kMaxChars; ++it) {
    if (!first) out += ',';
    first = false;
    if (!array) out += json(it.key()).dump() + ":";
    append_excerpt(it.value(), depth + 1, out);
  }
  out += array ? ']' : '}';
}

}  // namespace

std::string json_excerpt(const json& v) {
  std::string text;
  append_excerpt(v, 0, text);
  if (text.size() > kMaxChars) text = text.substr(0, kMaxChars) + "...";
  return text;
}

std::string value_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  return json_excerpt(v);
}

}  // namespace moetune::model
