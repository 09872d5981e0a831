// NVRTC-only unit tests (no GPU needed): a fixture that skips its tests where NVRTC cannot be
// loaded, a Jit whose kernel cache is a scratch folder removed with it, and a reader of ptxas's
// verbose log. Used by
// test_gemm_spec.cpp and test_moe_decode.cpp (compiles with `--ptxas-options=-v` read the
// registers and spills from the log).
#pragma once
#include <unistd.h>

#include <filesystem>
#include <regex>
#include <string>
#include <system_error>

#include <gtest/gtest.h>

#include "cuda/jit.hpp"
#include "cuda/nvrtc.hpp"

namespace moetune::test_support {

class NvrtcTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    try {
      (void)cuda::nvrtc_version();
    } catch (const std::exception& e) {
      skip_ = e.what();
    }
  }
  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
  }
  static inline std::string skip_;
};

// A Jit of its own, caching in <temp>/moetune-<tag>-<pid>, which goes with it.
class ScratchJit {
 public:
  explicit ScratchJit(const std::string& tag)
      : dir_(std::filesystem::temp_directory_path() /
             ("moetune-" + tag + "-" + std::to_string(::getpid()))),
        jit_(dir_.string()) {}
  ~ScratchJit() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  ScratchJit(const ScratchJit&) = delete;
  ScratchJit& operator=(const ScratchJit&) = delete;
  cuda::Jit* operator->() { return &jit_; }

 private:
  std::filesystem::path dir_;
  cuda::Jit jit_;
};

// A count from a `--ptxas-options=-v` log: the number captured by `pattern` (one group, e.g.
// "Used ([0-9]+) registers", "([0-9]+) bytes spill stores"), -1 when the log has no such line.
inline int ptxas_count(const std::string& log, const char* pattern) {
  std::smatch m;
  return std::regex_search(log, m, std::regex(pattern)) ? std::stoi(m[1].str()) : -1;
}

}  // namespace moetune::test_support
