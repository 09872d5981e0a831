// SGLang's published default rules (the named reference "sglang-default") and the common batch
// sizes. moetune's own default for its kernel is in moetune_default.cpp.
#include "moetune/config.hpp"

namespace moetune {

KernelConfig sglang_default_config(const MoeShape& shape, int M) {
  // {BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, GROUP_SIZE_M, num_warps, num_stages}, SPLIT_K 1.
  if (shape.dtype == Dtype::fp8_w8a8 && shape.block_shape) {
    const auto [block_n, block_k] = *shape.block_shape;
    return {64, block_n, block_k, 32, 4, 3};
  }
  if (shape.dtype == Dtype::fp8_w8a8) {
    return M <= shape.E ? KernelConfig{64, 128, 128, 1, 4, 4}
                        : KernelConfig{128, 256, 128, 32, 8, 4};
  }
  return M <= shape.E ? KernelConfig{16, 32, 64, 1, 4, 3} : KernelConfig{64, 64, 32, 8, 4, 3};
}

const std::vector<int>& default_batch_sizes() {
  static const std::vector<int> kBatchSizes = {1,   2,   4,   8,    16,   24,   32,   48,   64,
                                               96,  128, 256, 512,  1024, 1536, 2048, 3072, 4096};
  return kBatchSizes;
}

}  // namespace moetune
