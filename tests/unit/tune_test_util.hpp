// Shared helpers of the test_tune_* unit tests: the field of the InputError a call throws, a fresh
// temporary folder, and the options of the Qwen3.5-122B TP4 fp8 (block 128x128) shape on an H200.
#pragma once
#include <unistd.h>

#include <array>
#include <atomic>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "moetune/error.hpp"
#include "moetune/gpu_spec.hpp"
#include "moetune/tuner.hpp"

namespace moetune::tune::testing {

// The field() of the InputError f throws, or "(no error)".
inline std::string field_of(auto&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.field();
  }
  return "(no error)";
}

// <tmp>/<stem>_<pid>_<n>, empty, with n counting up per process.
inline std::filesystem::path fresh_temp_dir(const std::string& stem) {
  static std::atomic<int> counter{0};
  const auto p = std::filesystem::temp_directory_path() /
                 (stem + "_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p;
}

// E 256, N 256, K 3072, top-8, fp8 with 128x128 blocks, on an H200; kernel source hash "abc123".
inline TuneOptions qwen_fp8_h200_options(const std::filesystem::path& out, std::vector<int> batch) {
  TuneOptions o;
  o.shape.E = o.shape.E_global = 256;
  o.shape.N = 256;
  o.shape.K = 3072;
  o.shape.topk = 8;
  o.shape.dtype = Dtype::fp8_w8a8;
  o.shape.block_shape = std::array<int, 2>{128, 128};
  o.gpu = require_gpu("H200");
  o.batch = std::move(batch);
  o.out_dir = out;
  o.provenance.kernel_source_hash = "abc123";
  return o;
}

}  // namespace moetune::tune::testing
