// What the persistent and sliced GEMM kernels' host sides (persistent.cpp, sliced.cpp) share:
// both take block-fp8 shapes only, judged by their plan's shape_violation, and their kernel
// specs differ only in file, kernel, name and the template arguments after NUM_STAGES.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "cuda/jit.hpp"
#include "moetune/model.hpp"

namespace moetune::moe {

// A plan's shape rule: nullptr when (N, K, block_n, block_k) fits, else why not.
using ShapeViolation = const char* (*)(int N, int K, int block_n, int block_k);

// "" when `shape` is block fp8 and `violation` accepts it, else why not.
std::string block_fp8_unfit(const MoeShape& shape, ShapeViolation violation);

// The spec of `kernel` in `file` with template arguments N, K, TOPK, SCALE_BLOCK_N, NUM_STAGES
// and then `extra_args`; its name is "{name_prefix}_fp8b{bn}x{bk}_k{K}_n{N}_top{topk}_s{stages}"
// followed by `name_suffix`. Throws InputError ("shape") when block_fp8_unfit says why not.
cuda::KernelSpec block_fp8_spec(const MoeShape& shape, ShapeViolation violation,
                                const std::string& arch, const std::string& file,
                                const std::string& kernel, const std::string& name_prefix,
                                int stages,
                                std::vector<std::pair<std::string, std::string>> extra_args = {},
                                const std::string& name_suffix = "");

}  // namespace moetune::moe
