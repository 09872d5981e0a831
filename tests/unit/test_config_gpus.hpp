// GPUs of the config tests, from the spec table (moetune_perf), checked once so that a changed
// table shows up here rather than as a puzzling validation result.
#pragma once
#include <gtest/gtest.h>

#include "moetune/gpu_spec.hpp"

namespace moetune::test {

inline constexpr const char* kH200 = "NVIDIA H200";
inline constexpr const char* kRtxPro6000 = "NVIDIA RTX PRO 6000 Blackwell Server Edition";
inline constexpr const char* kA100 = "NVIDIA A100-SXM4-80GB";

inline const GpuSpec& gpu(const char* name) {
  const GpuSpec* spec = find_gpu(name);
  if (spec == nullptr) throw std::runtime_error(std::string("no GPU spec: ") + name);
  return *spec;
}

}  // namespace moetune::test
