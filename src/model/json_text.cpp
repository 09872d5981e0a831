#include "model/json_text.hpp"

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <vector>

#include <fmt/format.h>

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

std::string not_regular_text(std::filesystem::file_type type) {
  using std::filesystem::file_type;
  switch (type) {
    case file_type::directory: return "a folder, not a regular file";
    case file_type::fifo: return "not a regular file (a FIFO)";
    case file_type::character: return "not a regular file (a character device)";
    case file_type::block: return "not a regular file (a block device)";
    case file_type::socket: return "not a regular file (a socket)";
    default: return "not a regular file";
  }
}

// Names the file's size: a wrong path is then plain (a 3 GB image is no config.json).
std::string too_large_text(const std::string& size, std::uintmax_t max_bytes,
                           const std::string& kind) {
  return fmt::format("{}, more than the {} MiB {} may hold", size, max_bytes >> 20, kind);
}

// A regular file's text, or why not.
struct FileText {
  std::optional<std::string> text;
  std::string why;
};

FileText read_regular_file(const std::filesystem::path& path, std::uintmax_t max_bytes,
                           const std::string& kind) {
  namespace fs = std::filesystem;
  FileText r;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);  // follows symlinks
  if (ec) {
    r.why = "cannot open the file: " + ec.message();
    return r;
  }
  if (status.type() != fs::file_type::regular) {
    r.why = not_regular_text(status.type());
    return r;
  }
  const std::uintmax_t size = fs::file_size(path, ec);
  if (!ec && size > max_bytes) {
    r.why = too_large_text(fmt::format("{} bytes", size), max_bytes, kind);
    return r;
  }

  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    r.why = err != 0 ? fmt::format("cannot open the file: {}", std::strerror(err))
                     : std::string("cannot open the file");
    return r;
  }
  // Read to the end, not to the size stat gave: a file may grow meanwhile, and some (in /proc)
  // report 0 bytes. The cap still bounds what is held.
  std::string text;
  text.reserve(ec ? 0 : static_cast<std::size_t>(size));
  std::array<char, 1 << 16> chunk;
  while (in.read(chunk.data(), chunk.size()) || in.gcount() > 0) {
    text.append(chunk.data(), static_cast<std::size_t>(in.gcount()));
    if (text.size() > max_bytes) {
      r.why = too_large_text("it grew while being read", max_bytes, kind);
      return r;
    }
  }
  if (in.bad()) {
    r.why = "cannot read the file";
    return r;
  }
  r.text = std::move(text);
  return r;
}

}  // namespace

std::string read_input_file_text(const std::filesystem::path& path, const std::string& field,
                                 std::uintmax_t max_bytes, const std::string& kind) {
  FileText r = read_regular_file(path, max_bytes, kind);
  if (!r.text) throw InputError(field, path.string(), r.why);
  return std::move(*r.text);
}

std::string read_json_file_text(const std::filesystem::path& path, const std::string& field) {
  return read_input_file_text(path, field, kMaxJsonFileBytes, "a JSON input");
}

std::optional<std::string> read_cache_file_text(const std::filesystem::path& path,
                                                std::uintmax_t max_bytes) {
  return read_regular_file(path, max_bytes, "a cache file").text;
}

std::string not_replaceable_reason(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);  // a symlink to /dev/zero is a device
  if (ec || status.type() == fs::file_type::regular) return "";
  return not_regular_text(status.type());
}

json parse_json_text(const std::string& text) {
  DuplicateKeyCheck check;
  json::sax_parse(text, &check);  // throws DuplicateJsonKey for a key before any syntax error
  return json::parse(text);
}

}  // namespace moetune::model
