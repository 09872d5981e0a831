#include "cli/text.hpp"

#include <fmt/format.h>

namespace moetune::cli {
namespace {

// Length of the valid UTF-8 sequence at s[i] (1..4), or 0 when the bytes there are not UTF-8.
std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const auto cont = [&](std::size_t k) { return i + k < s.size() && (b(k) & 0xC0) == 0x80; };
  const unsigned char c = b(0);
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(1) || !cont(2)) return 0;
    if (c == 0xE0 && b(1) < 0xA0) return 0;  // overlong
    if (c == 0xED && b(1) >= 0xA0) return 0;  // surrogates
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    if (c == 0xF0 && b(1) < 0x90) return 0;
    if (c == 0xF4 && b(1) >= 0x90) return 0;
    return 4;
  }
  return 0;
}

// Appends `text` with line-breaking characters escaped; `json` also escapes '"' and '\'.
// Returns whether anything was escaped.
bool escape_into(std::string& out, std::string_view s, bool json) {
  bool escaped = false;
  for (std::size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const std::size_t n = utf8_length(s, i);
    std::string esc;
    if (n == 0) {
      esc = fmt::format("\\x{:02x}", c);
    } else if (n == 1) {
      switch (c) {
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        case '"': if (json) esc = "\\\""; break;
        case '\\': if (json) esc = "\\\\"; break;
        default:
          if (c < 0x20 || c == 0x7F) esc = fmt::format("\\u{:04x}", c);
      }
    } else if (n == 2 && c == 0xC2 && static_cast<unsigned char>(s[i + 1]) <= 0x9F) {
      esc = fmt::format("\\u{:04x}", static_cast<unsigned char>(s[i + 1]));  // C1, e.g. NEL
    } else if (n == 3 && c == 0xE2 && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
               (static_cast<unsigned char>(s[i + 2]) == 0xA8 ||
                static_cast<unsigned char>(s[i + 2]) == 0xA9)) {
      esc = static_cast<unsigned char>(s[i + 2]) == 0xA8 ? "\\u2028" : "\\u2029";
    }
    if (esc.empty()) {
      out.append(s.substr(i, n));
    } else {
      out += esc;
      escaped = escaped || (c != '"' && c != '\\');
    }
    i += n == 0 ? 1 : n;
  }
  return escaped;
}

}  // namespace

std::string one_line(std::string_view text) {
  std::string out;
  escape_into(out, text, false);
  return out;
}

std::string json_quoted(std::string_view text) {
  std::string out = "\"";
  escape_into(out, text, true);
  return out + "\"";
}

std::string shown(std::string_view text) {
  if (text.size() >= 2 && text.front() == '"' && text.back() == '"') return one_line(text);
  std::string plain;
  const bool needs_escape = escape_into(plain, text, false);
  const bool blank_edge = !text.empty() && (text.front() == ' ' || text.back() == ' ');
  if (text.empty() || needs_escape || blank_edge || text.front() == '"') return json_quoted(text);
  return plain;
}

}  // namespace moetune::cli
