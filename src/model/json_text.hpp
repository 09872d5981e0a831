// JSON text as users write it: nlohmann's parser, but an object that names a key twice is an
// error. nlohmann keeps the last value silently, so a hand-edited config table with two "64"
// entries, or a config.json with two hidden_size fields, would lose one unseen.
#pragma once
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

}  // namespace moetune::model
