// Config file names as SGLang and vLLM look them up (DESIGN.md "Config tables and files"), and
// a config's own short name.
#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "moetune/config.hpp"

namespace moetune {

std::string config_name(const KernelConfig& c) {
  std::string name = fmt::format("m{}n{}k{}_g{}_w{}_s{}_sk{}", c.BLOCK_SIZE_M, c.BLOCK_SIZE_N,
                                 c.BLOCK_SIZE_K, c.GROUP_SIZE_M, c.num_warps, c.num_stages,
                                 c.SPLIT_K);
  if (c.SWAP_AB != 0) name += fmt::format("_ab{}", c.SWAP_AB);
  return name;
}

std::string config_file_name(const MoeShape& shape, const std::string& device_name, Naming naming,
                             bool down) {
  std::string device = device_name;
  std::replace(device.begin(), device.end(), ' ', '_');
  // Both servers name the whole H200 family NVIDIA_H200 (H200 NVL, H200 141GB HBM3e, ...):
  // get_config_file_name maps any '_'-separated token "H200" to it (SGLang PR 2628, vLLM alike).
  for (std::size_t start = 0; start <= device.size();) {
    const std::size_t end = std::min(device.find('_', start), device.size());
    if (device.compare(start, end - start, "H200") == 0) {
      device = "NVIDIA_H200";
      break;
    }
    start = end + 1;
  }
  std::string name = fmt::format("E={},N={},device_name={}", shape.E, shape.N, device);
  // Servers omit the dtype for 16-bit weights: the table is the same for bf16 and fp16.
  if (shape.dtype != Dtype::bf16 && shape.dtype != Dtype::fp16) {
    name += fmt::format(",dtype={}", to_string(shape.dtype));
  }
  // SGLang formats a Python list ("[128, 128]"); vLLM joins without the space.
  if (shape.block_shape) {
    const auto [block_n, block_k] = *shape.block_shape;
    const char* sep = naming == Naming::sglang ? ", " : ",";
    name += fmt::format(",block_shape=[{}{}{}]", block_n, sep, block_k);
  }
  if (down) name += "_down";
  return name + ".json";
}

std::string sidecar_name(const std::string& table_file_name) {
  constexpr std::string_view kJson = ".json";
  std::string_view name = table_file_name;
  if (name.ends_with(kJson)) name.remove_suffix(kJson.size());
  return std::string(name) + ".meta.json";
}

}  // namespace moetune
