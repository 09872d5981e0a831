// The data types of the MoE layer's weights. One enum drives spelling, size and minimum arch.
#pragma once
#include <optional>
#include <string_view>

namespace moetune {

// bf16/fp16: weights and activations 16-bit. fp8_w8a8: e4m3 weights and activations, either
// block-wise (MoeShape::block_shape set, usually [128,128]) or per-tensor (block_shape unset).
enum class Dtype { bf16, fp16, fp8_w8a8 };

// "bf16", "fp16", "fp8_w8a8": the spelling of DESIGN.md, CLI and config-file names.
std::string_view to_string(Dtype d);
// Accepts the spellings above plus "bfloat16", "float16", "half", "fp8". nullopt otherwise.
std::optional<Dtype> parse_dtype(std::string_view s);
// Bytes of one weight element.
int weight_bytes(Dtype d);
// Smallest compute capability (major*10+minor) whose tensor cores run this dtype (fp8: 89).
int min_compute_capability(Dtype d);

}  // namespace moetune
