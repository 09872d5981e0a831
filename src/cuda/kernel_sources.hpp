// The kernel sources under kernels/, embedded at build time (cmake/EmbedKernels.cmake).
#pragma once
#include <string_view>
#include <vector>

namespace moetune::cuda {

struct KernelSource {
  std::string_view path;  // relative to kernels/, e.g. "common/tile_math.cuh"
  std::string_view text;
};
const std::vector<KernelSource>& kernel_sources();
// SHA-256 (hex) over all embedded kernel files: keys the JIT cache and every record.
std::string_view kernel_source_hash();

}  // namespace moetune::cuda
