// Config tables as JSON: read (strict about values, lenient about foreign top-level keys) and
// write (only batch-size keys, numeric order, classic key order, 4-space indent, atomically).
#include <algorithm>
#include <cctype>
#include <climits>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "config/config_keys.hpp"
#include "model/config_view.hpp"
#include "model/json_text.hpp"
#include "moetune/config.hpp"
#include "moetune/error.hpp"

namespace moetune {

const std::array<const char*, 6> kClassicKeys = {"BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K",
                                                 "GROUP_SIZE_M", "num_warps",    "num_stages"};
const std::array<const char*, 2> kMoetuneKeys = {"SPLIT_K", "SWAP_AB"};

namespace {

using config::kConfigFields;

bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

[[noreturn]] void refuse_key(const std::string& key, const std::string& source,
                             const std::string& reason) {
  throw InputError("config key", fmt::format("\"{}\"", key),
                   fmt::format("{} (in {})", reason, source));
}

// A top-level key: the batch size M, or nullopt for a foreign key to skip (e.g.
// "triton_version"). A key that looks numeric (first non-blank is a digit or sign) but is not a
// plain positive decimal int is refused, not skipped: servers parse keys with int(), so "01" or
// "-4" would mean something to them that moetune would silently drop.
std::optional<int> parse_batch_key(const std::string& key, const std::string& source) {
  const auto first = std::find_if(key.begin(), key.end(),
                                  [](unsigned char c) { return !std::isspace(c); });
  if (first == key.end() || !(is_digit(*first) || *first == '-' || *first == '+')) {
    return std::nullopt;
  }
  if (key[0] == '-') refuse_key(key, source, "a batch size must be a positive integer");
  if (!std::all_of(key.begin(), key.end(), is_digit)) {
    refuse_key(key, source, "not a plain decimal integer");
  }
  if (key.find_first_not_of('0') == std::string::npos) {
    refuse_key(key, source, "a batch size must be a positive integer");
  }
  if (key[0] == '0') refuse_key(key, source, "leading zero; write batch sizes as plain decimals");
  if (key.size() > 10 || std::stoll(key) > INT_MAX) {
    refuse_key(key, source, fmt::format("larger than {}", INT_MAX));
  }
  return std::stoi(key);
}

// Integers only: 64.0 or "64" would pass through some parsers and not others.
std::optional<int> int_at_least(const nlohmann::json& j, int min) {
  if (j.is_number_unsigned()) {
    const auto v = j.get<unsigned long long>();
    if (v >= static_cast<unsigned long long>(min) && v <= INT_MAX) return static_cast<int>(v);
  } else if (j.is_number_integer()) {
    const auto v = j.get<long long>();
    if (v >= min && v <= INT_MAX) return static_cast<int>(v);
  }
  return std::nullopt;
}

// Without nlohmann's "[json.exception.parse_error.101] " prefix.
std::string short_json_error(const std::string& what) {
  const auto close = what.find("] ");
  return close == std::string::npos ? what : what.substr(close + 2);
}

template <class Json>
Json config_object(const KernelConfig& c) {
  Json j = Json::object();
  for (const auto& field : kConfigFields) {
    const int value = c.*field.member;
    // Optional keys at their default are left out, so tables stay in the servers' schema.
    if (!field.required && value == KernelConfig{}.*field.member) continue;
    j[field.key] = value;
  }
  return j;
}

}  // namespace

KernelConfig parse_kernel_config(const nlohmann::json& j, std::vector<std::string>* unknown,
                                 const std::string& source) {
  if (!j.is_object()) {
    throw InputError(source, model::json_excerpt(j), "expected an object of config keys");
  }
  KernelConfig config;
  for (const auto& field : kConfigFields) {
    const std::string name = fmt::format("{}.{}", source, field.key);
    const auto it = j.find(field.key);
    if (it == j.end()) {
      if (field.required) throw InputError(name, "(missing)", "required config key");
      continue;
    }
    const std::optional<int> value = int_at_least(*it, field.min);
    if (!value)
      throw InputError(name, model::json_excerpt(*it),
                       field.min == 1 ? "must be a positive integer" : "must be an integer >= 0");
    config.*field.member = *value;
  }
  for (const auto& [key, value] : j.items()) {
    const bool known = std::any_of(kConfigFields.begin(), kConfigFields.end(),
                                   [&](const auto& f) { return key == f.key; });
    if (!known && unknown != nullptr) unknown->push_back(key);
  }
  return config;
}

ParsedTable parse_config_table(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object()) {
    throw InputError("config", source, "expected a JSON object mapping batch sizes to configs");
  }
  ParsedTable table;
  for (const auto& [key, value] : j.items()) {
    const std::optional<int> M = parse_batch_key(key, source);
    if (!M) {
      table.skipped_keys.push_back(key);
      continue;
    }
    ParsedEntry entry;
    entry.config = parse_kernel_config(value, &entry.unknown_keys, fmt::format("config[{}]", *M));
    table.entries.emplace(*M, std::move(entry));
  }
  return table;
}

ParsedTable read_config_table(const std::filesystem::path& path) {
  const std::string text = model::read_json_file_text(path, "config");
  nlohmann::json j;
  try {
    j = model::parse_json_text(text);
  } catch (const model::DuplicateJsonKey& e) {
    throw InputError("config", path.string(), std::string("invalid JSON: ") + e.what());
  } catch (const nlohmann::json::exception& e) {
    // parse_error, and out_of_range for a number too large for a double ("1e999").
    throw InputError("config", path.string(), "invalid JSON: " + short_json_error(e.what()));
  }
  return parse_config_table(j, path.string());
}

nlohmann::json to_json(const KernelConfig& c) { return config_object<nlohmann::json>(c); }

nlohmann::json to_json(const ConfigTable& t) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [M, config] : t) j[std::to_string(M)] = to_json(config);
  return j;
}

ConfigTable to_table(const ParsedTable& p) {
  ConfigTable table;
  for (const auto& [M, entry] : p.entries) table.emplace(M, entry.config);
  return table;
}

std::string dump_config_table(const ConfigTable& t) {
  // ordered_json keeps insertion order: keys numeric (std::map order), config keys classic.
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& [M, config] : t) {
    j[std::to_string(M)] = config_object<nlohmann::ordered_json>(config);
  }
  return j.dump(4) + "\n";
}

void write_config_table(const std::filesystem::path& path, const ConfigTable& t) {
  write_file_atomic(path, dump_config_table(t));
}

}  // namespace moetune
