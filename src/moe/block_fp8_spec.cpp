// Block-fp8 kernel specs shared by the persistent and sliced kernels: see block_fp8_spec.hpp.
#include "moe/block_fp8_spec.hpp"

#include <fmt/format.h>

#include "moetune/error.hpp"

namespace moetune::moe {

std::string block_fp8_unfit(const MoeShape& s, ShapeViolation violation) {
  if (s.dtype != Dtype::fp8_w8a8 || !s.block_shape) return "the kernel is block fp8 only";
  const char* why = violation(s.N, s.K, (*s.block_shape)[0], (*s.block_shape)[1]);
  return why == nullptr ? "" : why;
}

cuda::KernelSpec block_fp8_spec(const MoeShape& s, ShapeViolation violation,
                                const std::string& arch, const std::string& file,
                                const std::string& kernel, const std::string& name_prefix,
                                int stages,
                                std::vector<std::pair<std::string, std::string>> extra_args,
                                const std::string& name_suffix) {
  const std::string why = block_fp8_unfit(s, violation);
  if (!why.empty()) throw InputError("shape", s.source.empty() ? "?" : s.source, why);
  cuda::KernelSpec k;
  k.file = file;
  k.kernel = kernel;
  k.arch = arch;
  k.template_args = {{"N", std::to_string(s.N)},
                     {"K", std::to_string(s.K)},
                     {"TOPK", std::to_string(s.topk)},
                     {"SCALE_BLOCK_N", std::to_string((*s.block_shape)[0])},
                     {"NUM_STAGES", std::to_string(stages)}};
  for (auto& a : extra_args) k.template_args.push_back(std::move(a));
  k.name = fmt::format("{}_fp8b{}x{}_k{}_n{}_top{}_s{}{}", name_prefix, (*s.block_shape)[0],
                       (*s.block_shape)[1], s.K, s.N, s.topk, stages, name_suffix);
  return k;
}

}  // namespace moetune::moe
