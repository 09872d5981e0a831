// check_dtype_on_gpu: refuses a dtype the GPU's tensor cores do not run (fp8 below sm_89).
#include <fmt/format.h>

#include "moetune/error.hpp"
#include "moetune/gpu_spec.hpp"
#include "moetune/model.hpp"

namespace moetune {

void check_dtype_on_gpu(const MoeShape& shape, const GpuSpec& gpu) {
  const int need = min_compute_capability(shape.dtype);
  if (gpu.compute_capability() >= need) return;
  throw InputError("dtype", std::string(to_string(shape.dtype)),
                   fmt::format("{} needs compute capability >= {}.{}; {} is {}.{}{}",
                               shape.dtype == Dtype::fp8_w8a8 ? "fp8" : to_string(shape.dtype),
                               need / 10, need % 10, gpu.name, gpu.cc_major, gpu.cc_minor,
                               // bf16 runs from sm_80 on, where fp8 is the only refusal
                               shape.dtype == Dtype::fp8_w8a8 && gpu.compute_capability() >= 80
                                   ? " (--dtype bf16 runs the model there)"
                                   : ""));
}

}  // namespace moetune
