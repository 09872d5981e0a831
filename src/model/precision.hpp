// The weight dtype and fp8 block shape of a model: from --dtype, or from the config's
// quantization_config (and dtype) when --dtype is auto. Refuses what the kernels do not run.
#pragma once
#include <array>
#include <optional>
#include <string>

#include "model/config_view.hpp"
#include "moetune/dtype.hpp"
#include "moetune/model.hpp"

namespace moetune::model {

struct Precision {
  Dtype dtype = Dtype::bf16;
  std::optional<std::array<int, 2>> block_shape;  // fp8 block-wise [block_n, block_k]
  std::string note;  // why the dtype differs from the config's (e.g. float32 analysed as bf16)
};

// What a config's quantization says, before any --dtype choice.
struct Quantization {
  enum class Kind { none, fp8, unsupported };
  Kind kind = Kind::none;
  std::string method;                             // as written, e.g. "fp8", "mxfp4", "NVFP4"
  std::optional<std::array<int, 2>> block_shape;  // fp8 only: weight_block_size
};

// Reads quantization_config (top level first; compression_config as compressed-tensors).
// quant_method "modelopt" reads quant_algo: FP8 is per-tensor fp8, null is unquantized.
Quantization read_quantization(const ConfigView& view);

// --dtype auto: the config decides (unsupported methods throw InputError on "quantization");
// an explicit bf16/fp16 skips the quantization check; an explicit fp8_w8a8 keeps the config's
// fp8 block shape, else per-tensor. --block-shape then replaces the block shape (fp8 only).
Precision resolve_precision(const ConfigView& view, const ModelOptions& opts);

}  // namespace moetune::model
