// SHA-256 of a byte string, as lowercase hex. Keys the JIT cache (no GPU, no CUDA).
#pragma once
#include <string>
#include <string_view>

namespace moetune::cuda {

std::string sha256_hex(std::string_view bytes);

}  // namespace moetune::cuda
