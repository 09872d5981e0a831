// The Dtype table: spellings, sizes, minimum architecture.
#include <gtest/gtest.h>

#include "moetune/dtype.hpp"

namespace moetune {
namespace {

TEST(Dtype, SpellingsRoundTrip) {
  for (Dtype d : {Dtype::bf16, Dtype::fp16, Dtype::fp8_w8a8}) {
    EXPECT_EQ(parse_dtype(to_string(d)), d);
  }
  EXPECT_EQ(to_string(Dtype::fp8_w8a8), "fp8_w8a8");
  EXPECT_EQ(parse_dtype("bfloat16"), Dtype::bf16);
  EXPECT_EQ(parse_dtype("Float16"), Dtype::fp16);
  EXPECT_EQ(parse_dtype("half"), Dtype::fp16);
  EXPECT_EQ(parse_dtype("fp8"), Dtype::fp8_w8a8);
  EXPECT_FALSE(parse_dtype("int8").has_value());
  EXPECT_FALSE(parse_dtype("").has_value());
}

TEST(Dtype, SizesAndArch) {
  EXPECT_EQ(weight_bytes(Dtype::bf16), 2);
  EXPECT_EQ(weight_bytes(Dtype::fp16), 2);
  EXPECT_EQ(weight_bytes(Dtype::fp8_w8a8), 1);
  EXPECT_EQ(min_compute_capability(Dtype::fp8_w8a8), 89);
  EXPECT_EQ(min_compute_capability(Dtype::bf16), 80);
}

}  // namespace
}  // namespace moetune
