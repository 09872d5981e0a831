// The `shapes` object, shared by `shapes --json`, `bench`, `profile` and `tune --dry-run --json`.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "moetune/config.hpp"
#include "moetune/gpu_spec.hpp"
#include "moetune/model.hpp"

namespace moetune::cli {

// moetune::shape_json (the one copy of the schema, src/config/shape_json.cpp) with the config
// file names for `gpu`.
inline nlohmann::ordered_json shape_json(const MoeShape& shape, const GpuSpec& gpu) {
  return moetune::shape_json(shape, gpu.name);
}

// "qwen3.5-122b-a10b-fp8 at TP4" style one-line description of the model and parallelism.
std::string shape_title(const MoeShape& shape);

}  // namespace moetune::cli
