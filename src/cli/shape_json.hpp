// The `shapes` object, shared by `shapes --json` and `tune --dry-run --json`.
#pragma once
#include <nlohmann/json.hpp>

#include "moetune/gpu_spec.hpp"
#include "moetune/model.hpp"

namespace moetune::cli {

// Exactly DESIGN.md's keys, in its order: architecture, E, E_global, N, K, topk, dtype,
// block_shape, tp, ep, routing{...}, moe_layers, config_file{sglang, vllm} (file names for `gpu`).
nlohmann::ordered_json shape_json(const MoeShape& shape, const GpuSpec& gpu);

// "qwen3.5-122b-a10b-fp8 at TP4" style one-line description of the model and parallelism.
std::string shape_title(const MoeShape& shape);

}  // namespace moetune::cli
