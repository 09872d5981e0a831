// parse_block_shape (--block-shape) and check_dtype_on_gpu.
#include <string>

#include <gtest/gtest.h>

#include "moetune/error.hpp"
#include "moetune/gpu_spec.hpp"
#include "moetune/model.hpp"

namespace moetune {
namespace {

TEST(BlockShape, Parses) {
  EXPECT_EQ(parse_block_shape("128,128", "block-shape"), (std::array<int, 2>{128, 128}));
  EXPECT_EQ(parse_block_shape("64, 128", "block-shape"), (std::array<int, 2>{64, 128}));
  EXPECT_EQ(parse_block_shape("[128, 64]", "block-shape"), (std::array<int, 2>{128, 64}));
}

TEST(BlockShape, RejectsWithFieldAndText) {
  for (const char* bad : {"", "128", "128,", ",128", "0,128", "-128,128", "128x128", "a,b",
                          "128,128,128", "99999999999,1"}) {
    try {
      parse_block_shape(bad, "block-shape");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const InputError& e) {
      EXPECT_EQ(e.field(), "block-shape");
      EXPECT_EQ(e.value(), bad);
    }
  }
}

GpuSpec gpu(const char* name, int major, int minor) {
  GpuSpec g;
  g.name = name;
  g.cc_major = major;
  g.cc_minor = minor;
  return g;
}

TEST(DtypeOnGpu, Fp8NeedsSm89) {
  MoeShape s;
  s.dtype = Dtype::fp8_w8a8;
  try {
    check_dtype_on_gpu(s, gpu("NVIDIA A100-SXM4-80GB", 8, 0));
    ADD_FAILURE() << "fp8 accepted on sm_80";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "dtype");
    EXPECT_EQ(e.value(), "fp8_w8a8");
    EXPECT_EQ(e.reason(), "fp8 needs compute capability >= 8.9; NVIDIA A100-SXM4-80GB is 8.0 "
                          "(--dtype bf16 runs the model there)");
  }
  EXPECT_NO_THROW(check_dtype_on_gpu(s, gpu("NVIDIA L40S", 8, 9)));
  EXPECT_NO_THROW(check_dtype_on_gpu(s, gpu("NVIDIA H200", 9, 0)));
  s.dtype = Dtype::bf16;
  EXPECT_NO_THROW(check_dtype_on_gpu(s, gpu("NVIDIA A100-SXM4-80GB", 8, 0)));
}

}  // namespace
}  // namespace moetune
