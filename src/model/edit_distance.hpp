// How far apart two names are, for "did you mean" hints (a misspelt option, a misspelt preset).
#pragma once

#include <cstddef>
#include <string>

namespace moetune {

// Edit distance with adjacent transpositions (optimal string alignment): "bacth" is 1 from
// "batch", "deepsek-v3" 1 from "deepseek-v3".
std::size_t edit_distance(const std::string& a, const std::string& b);

}  // namespace moetune
