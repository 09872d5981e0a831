// The anchor shapes `moetune check` runs: the values of shared/ANCHORS.md, taken from the presets.
#include <gtest/gtest.h>

#include "moe/check.hpp"

namespace moetune::moe {
namespace {

TEST(AnchorCheckShapes, AreTheAnchorsOfAnchorsMd) {
  const auto v = anchor_check_shapes();
  ASSERT_EQ(v.size(), 3u);
  const auto& q = v[0].shape;
  EXPECT_EQ(v[0].name, "qwen3.5-122b tp4");
  EXPECT_EQ(q.E, 256); EXPECT_EQ(q.E_global, 256); EXPECT_EQ(q.N, 256); EXPECT_EQ(q.K, 3072);
  EXPECT_EQ(q.topk, 8); EXPECT_EQ(q.tp, 4);
  EXPECT_EQ(q.routing.scoring, "softmax"); EXPECT_TRUE(q.routing.renormalize);
  const auto& d = v[1].shape;
  EXPECT_EQ(d.E, 256); EXPECT_EQ(d.N, 256); EXPECT_EQ(d.K, 7168); EXPECT_EQ(d.topk, 8);
  EXPECT_EQ(d.tp, 8);
  EXPECT_EQ(d.routing.scoring, "sigmoid"); EXPECT_EQ(d.routing.n_group, 8);
  EXPECT_EQ(d.routing.topk_group, 4); EXPECT_DOUBLE_EQ(d.routing.routed_scaling_factor, 2.5);
  EXPECT_TRUE(d.routing.correction_bias);
  const auto& m = v[2].shape;
  EXPECT_EQ(m.E, 8); EXPECT_EQ(m.N, 7168); EXPECT_EQ(m.K, 4096); EXPECT_EQ(m.topk, 2);
  EXPECT_EQ(m.tp, 2);
  for (const auto& cs : v) EXPECT_EQ(cs.rank, 0);
}

TEST(AnchorCheckShapes, DtypeVariantsReplaceThePresetDtype) {
  const auto d = anchor_check_shapes()[1].shape;  // deepseek-v3: fp8 block in its config
  EXPECT_EQ(with_dtype_variant(d, "bf16").dtype, Dtype::bf16);
  EXPECT_FALSE(with_dtype_variant(d, "bf16").block_shape.has_value());
  EXPECT_FALSE(with_dtype_variant(d, "fp8_tensor").block_shape.has_value());
  EXPECT_EQ(with_dtype_variant(d, "fp8_block").block_shape, (std::array<int, 2>{128, 128}));
}

}  // namespace
}  // namespace moetune::moe
