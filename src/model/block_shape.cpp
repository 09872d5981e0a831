// parse_block_shape: "BN,BK" for --block-shape.
#include <charconv>
#include <climits>

#include "moetune/error.hpp"
#include "moetune/model.hpp"

namespace moetune {
namespace {

// A positive int filling all of `s` (spaces around it allowed).
std::optional<int> parse_positive(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  int v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v <= 0) return std::nullopt;
  return v;
}

}  // namespace

std::array<int, 2> parse_block_shape(const std::string& text, const std::string& name) {
  std::string_view s = text;
  // Also accept the bracketed form of config file names, "[128, 128]".
  if (s.size() >= 2 && s.front() == '[' && s.back() == ']') s = s.substr(1, s.size() - 2);
  const auto comma = s.find(',');
  if (comma != std::string_view::npos) {
    const auto n = parse_positive(s.substr(0, comma));
    const auto k = parse_positive(s.substr(comma + 1));
    if (n && k) return {*n, *k};
  }
  throw InputError(name, text, "expected BN,BK: two positive integers such as 128,128");
}

}  // namespace moetune
