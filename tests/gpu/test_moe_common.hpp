// Shared by the MoE GPU tests: the spec-table entry of GPU 0 (the fallback H200 entry when the
// table does not know it).
#pragma once
#include "cuda/device.hpp"
#include "moetune/gpu_spec.hpp"

namespace moetune::moe::testing {

inline const GpuSpec& local_gpu() {
  const cuda::DeviceInfo info = cuda::query_device(0);
  if (const GpuSpec* g = find_gpu(info.name)) return *g;
  return require_gpu(kFallbackGpu);
}

}  // namespace moetune::moe::testing
