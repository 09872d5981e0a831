// NVRTC-only unit tests (no GPU needed): a fixture that skips its tests where NVRTC cannot be
// loaded, a Jit whose kernel cache is a scratch folder removed with it, a reader of ptxas's
// verbose log, and the register / spill expectation of the persistent and sliced kernels. Used
// by test_gemm_spec.cpp, test_moe_decode.cpp, test_moe_persistent.cpp and test_moe_sliced.cpp
// (compiles with `--ptxas-options=-v` read the registers and spills from the log).
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

// Compiles `k` with ptxas's verbose log and expects a cubin, at most `max_regs` registers per
// thread and no spill stores (ptxas spills rather than exceed a __launch_bounds__ limit, so the
// spill count is what fails when a kernel outgrows it).
inline void expect_compiles_without_spills(ScratchJit& jit, cuda::KernelSpec k, int max_regs) {
  k.options.push_back("--ptxas-options=-v");
  const cuda::CompiledKernel c = jit->compile(k);
  ASSERT_FALSE(c.cubin.empty()) << c.log;
  const int regs = ptxas_count(c.log, "Used ([0-9]+) registers");
  EXPECT_GT(regs, 0) << c.log;
  EXPECT_LE(regs, max_regs) << k.name;
  EXPECT_EQ(ptxas_count(c.log, "([0-9]+) bytes spill stores"), 0) << c.log;
}

}  // namespace moetune::test_support
