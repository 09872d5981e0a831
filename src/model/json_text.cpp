#include "model/json_text.hpp"

#include <cstdint>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "io/regular_file.hpp"
#include "moetune/error.hpp"

namespace moetune::model {
namespace {

using json = nlohmann::json;

// A SAX pass that only checks keys. nlohmann's parse callback would do it in one pass, but its
// callback parser scans the whole enclosing object for discarded values at each object_end:
// quadratic in a table's entries (8,000 took 7 s). Checking first and then building the value
// with the plain parser keeps both passes linear.
class DuplicateKeyCheck final : public nlohmann::json_sax<json> {
 public:
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    open_.emplace_back();
    return true;
  }
  bool key(string_t& key) override {
    if (!open_.back().insert(key).second) {
      throw DuplicateJsonKey("duplicate key \"" + key + "\"");
    }
    return true;
  }
  bool end_object() override {
    open_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  // Stop; json::parse then throws nlohmann's error, with its type, for the same text.
  bool parse_error(std::size_t, const std::string&, const json::exception&) override {
    return false;
  }

 private:
  std::vector<std::set<std::string>> open_;  // the keys of each object being parsed
};

}  // namespace

std::string read_input_file_text(const std::filesystem::path& path, const std::string& field,
                                 std::uintmax_t max_bytes, const std::string& kind) {
  io::FileBytes r = io::read_regular_file(path.string(), max_bytes, kind);
  if (!r.bytes) throw InputError(field, path.string(), r.why);
  return std::move(*r.bytes);
}

std::string read_json_file_text(const std::filesystem::path& path, const std::string& field) {
  return read_input_file_text(path, field, kMaxJsonFileBytes, "a JSON input");
}

json parse_json_text(const std::string& text) {
  DuplicateKeyCheck check;
  json::sax_parse(text, &check);  // throws DuplicateJsonKey for a key before any syntax error
  return json::parse(text);
}

}  // namespace moetune::model
