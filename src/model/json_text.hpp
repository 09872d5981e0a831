// JSON text as users write it: nlohmann's parser, but an object that names a key twice is an
// error. nlohmann keeps the last value silently, so a hand-edited config table with two "64"
// entries, or a config.json with two hidden_size fields, would lose one unseen.
#pragma once
#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace moetune::model {

// Thrown by parse_json_text; what() is `duplicate key "<key>"`.
struct DuplicateJsonKey : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// nlohmann::json::parse(text), plus DuplicateJsonKey for a key repeated within one object.
// Other errors are nlohmann's (json::exception).
nlohmann::json parse_json_text(const std::string& text);

// The most a JSON file that a user names (a model's config.json, a config table) may hold. Real
// ones are a few KB; the cap is far above that, yet keeps a wrong path (a disk image, a log)
// from costing gigabytes of memory and seconds before its parse error.
inline constexpr std::uintmax_t kMaxJsonFileBytes = std::uintmax_t{64} << 20;

// The text of the file a user named, to parse. Throws InputError(field, path, reason) when the
// path (symlinks followed) is not a regular file (a folder, a FIFO or a device such as /dev/zero
// would fail late, block forever or never end), holds more than kMaxJsonFileBytes, or cannot be
// read.
std::string read_json_file_text(const std::filesystem::path& path, const std::string& field);

// The same check and read for any file moetune reads back: `max_bytes` caps it, and `kind` names
// it in the size reason ("<n> bytes, more than the <cap> MiB <kind> may hold").
std::string read_input_file_text(const std::filesystem::path& path, const std::string& field,
                                 std::uintmax_t max_bytes, const std::string& kind);

}  // namespace moetune::model
