// The search space: the classic 1,920 times SPLIT_K {1,2,4,8}, per GEMM; every combination once;
// it holds moetune's own decode default (fp8 up at M=1: SPLIT_K 8).
#include <algorithm>
#include <set>

#include <gtest/gtest.h>

#include "moetune/tuner.hpp"

namespace moetune::tune {
namespace {

TEST(SearchSpace, Classic1920TimesSplitKAndSwapAb) {
  const SearchSpace& s = default_space();
  std::size_t classic = 1;
  std::size_t split_k = 0, swap_ab = 0;
  for (const auto& [key, values] : s.axes) {
    if (key == "SPLIT_K") {
      split_k = values.size();
    } else if (key == "SWAP_AB") {
      swap_ab = values.size();
    } else {
      classic *= values.size();
    }
  }
  EXPECT_EQ(classic, 1920u);
  EXPECT_EQ(split_k, 4u);
  EXPECT_EQ(swap_ab, 2u);
  EXPECT_EQ(s.size(), 1920u * 4u * 2u);
  const std::vector<KernelConfig> all = s.configs();
  ASSERT_EQ(all.size(), 15360u);
  EXPECT_EQ(std::set<KernelConfig>(all.begin(), all.end()).size(), 15360u);
  // Corners of the space are present.
  const KernelConfig small{16, 32, 64, 1, 4, 2, 1};
  const KernelConfig large{256, 256, 256, 64, 8, 5, 8, 1};
  EXPECT_NE(std::find(all.begin(), all.end(), small), all.end());
  EXPECT_NE(std::find(all.begin(), all.end(), large), all.end());
}

TEST(SearchSpace, HoldsTheDefaultSplitK8) {
  MoeShape s;
  s.E = s.E_global = 256;
  s.N = 256;
  s.K = 3072;
  s.topk = 8;
  s.dtype = Dtype::fp8_w8a8;
  s.block_shape = std::array<int, 2>{128, 128};
  s.tp = 4;
  const KernelConfig def = moetune_default_config(s, require_gpu("H200"), 1, false);
  ASSERT_EQ(def.SPLIT_K, 8);
  const std::vector<KernelConfig> all = default_space().configs();
  EXPECT_NE(std::find(all.begin(), all.end(), def), all.end());
}

TEST(SearchSpace, JsonListsEachAxis) {
  const nlohmann::json j = default_space().to_json();
  EXPECT_EQ(j.at("BLOCK_SIZE_M"), nlohmann::json({16, 32, 64, 128, 256}));
  EXPECT_EQ(j.at("num_stages"), nlohmann::json({2, 3, 4, 5}));
  EXPECT_EQ(j.at("SPLIT_K"), nlohmann::json({1, 2, 4, 8}));
  EXPECT_EQ(j.at("SWAP_AB"), nlohmann::json({0, 1}));
  EXPECT_EQ(j.size(), 8u);
}

}  // namespace
}  // namespace moetune::tune
