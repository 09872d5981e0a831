#include "moetune/dtype.hpp"

#include <algorithm>
#include <cctype>
#include <string>

namespace moetune {

std::string_view to_string(Dtype d) {
  switch (d) {
    case Dtype::bf16: return "bf16";
    case Dtype::fp16: return "fp16";
    case Dtype::fp8_w8a8: return "fp8_w8a8";
  }
  return "?";
}

std::optional<Dtype> parse_dtype(std::string_view s) {
  std::string t(s);
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  if (t == "bf16" || t == "bfloat16") return Dtype::bf16;
  if (t == "fp16" || t == "float16" || t == "half") return Dtype::fp16;
  if (t == "fp8_w8a8" || t == "fp8") return Dtype::fp8_w8a8;
  return std::nullopt;
}

int weight_bytes(Dtype d) { return d == Dtype::fp8_w8a8 ? 1 : 2; }

int min_compute_capability(Dtype d) { return d == Dtype::fp8_w8a8 ? 89 : 80; }

}  // namespace moetune
