#include "cli/shape_json.hpp"

#include <fmt/format.h>

// shape_title; the `shapes` object itself is moetune::shape_json (src/config/shape_json.cpp).

namespace moetune::cli {

std::string shape_title(const MoeShape& s) {
  std::string par;
  if (s.tp > 1) par += fmt::format(" TP{}", s.tp);
  if (s.ep > 1) par += fmt::format(" EP{}", s.ep);
  std::string name = s.source.empty() ? s.architecture : s.source;
  if (name.empty()) name = "(overrides)";
  return par.empty() ? name : fmt::format("{} at{}", name, par);
}

}  // namespace moetune::cli
