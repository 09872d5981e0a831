// Expected values are computed by hand from DESIGN.md's formulas (comments show the arithmetic).
#include "moetune/roofline.hpp"

#include <gtest/gtest.h>

#include "moetune/error.hpp"

namespace moetune {
namespace {

// Qwen3.5-122B-A10B at TP4: E=256, N=1024/4=256, K=3072, topk=8.
MoeShape qwen_tp4(Dtype dtype, bool block = false) {
  MoeShape s;
  s.E = 256, s.E_global = 256, s.N = 256, s.K = 3072, s.topk = 8;
  s.dtype = dtype;
  if (block) s.block_shape = std::array<int, 2>{128, 128};
  s.tp = 4;
  return s;
}

// DeepSeek-V3 at TP8: E=256, N=2048/8=256, K=7168, topk=8, fp8 block [128, 128].
MoeShape deepseek_v3_tp8() {
  MoeShape s = qwen_tp4(Dtype::fp8_w8a8, true);
  s.K = 7168;
  s.tp = 8;
  return s;
}

const Ceilings kH200Bf16{4.8e12, 989.4e12};
const Ceilings kH200Fp8{4.8e12, 1978.9e12};

TEST(Roofline, ExpertWeightBytes) {
  // 3 * 256 * 3072 * 2
  EXPECT_DOUBLE_EQ(expert_weight_bytes(qwen_tp4(Dtype::bf16)), 4718592);
  EXPECT_DOUBLE_EQ(expert_weight_bytes(qwen_tp4(Dtype::fp16)), 4718592);
  // per-tensor fp8: 3 * 256 * 3072 * 1, no scale blocks
  EXPECT_DOUBLE_EQ(expert_weight_bytes(qwen_tp4(Dtype::fp8_w8a8)), 2359296);
  // + ((512/128)*(3072/128) + (3072/128)*(256/128)) * 4 = (96 + 48) * 4 = 576
  EXPECT_DOUBLE_EQ(expert_weight_bytes(qwen_tp4(Dtype::fp8_w8a8, true)), 2359296 + 576);
  // 3 * 256 * 7168 + ((4*56) + (56*2)) * 4 = 5505024 + 1344
  EXPECT_DOUBLE_EQ(expert_weight_bytes(deepseek_v3_tp8()), 5506368);
}

TEST(Roofline, QwenBf16OnH200) {
  const MoeShape s = qwen_tp4(Dtype::bf16);
  RooflineRow r = roofline_row(s, kH200Bf16, 1);
  EXPECT_EQ(r.M, 1);
  EXPECT_DOUBLE_EQ(r.expected_experts, 8);              // 256 * (1 - (31/32)^1)
  EXPECT_DOUBLE_EQ(r.bytes, 8.0 * 4718592 + 2 * 3072 * 2);  // 37,761,024
  EXPECT_DOUBLE_EQ(r.flops, 6.0 * 1 * 8 * 256 * 3072);  // 37,748,736
  EXPECT_NEAR(r.t_mem_us, 7.86688, 1e-9);               // 37,761,024 / 4.8e12
  EXPECT_NEAR(r.t_compute_us, 0.0381531595, 1e-9);      // 37,748,736 / 989.4e12
  EXPECT_DOUBLE_EQ(r.floor_us, r.t_mem_us);
  EXPECT_EQ(r.bound, "memory");

  r = roofline_row(s, kH200Bf16, 8);
  EXPECT_NEAR(r.expected_experts, 57.42083078599535, 1e-9);  // 256 * (1 - (31/32)^8)
  EXPECT_NEAR(r.bytes, 271043776.78015137, 1e-3);
  EXPECT_NEAR(r.t_mem_us, 56.46745349586487, 1e-9);

  r = roofline_row(s, kH200Bf16, 4096);  // every expert active
  EXPECT_NEAR(r.expected_experts, 256, 1e-9);
  EXPECT_NEAR(r.bytes, 256.0 * 4718592 + 4096.0 * 3072 * 4, 1e-3);  // 1,258,291,200
  EXPECT_NEAR(r.t_mem_us, 262.144, 1e-9);
  EXPECT_NEAR(r.t_compute_us, 156.2753412734991, 1e-9);
  EXPECT_EQ(r.bound, "memory");
}

TEST(Roofline, QwenFp8BlockOnH200CountsScales) {
  const MoeShape s = qwen_tp4(Dtype::fp8_w8a8, true);
  RooflineRow r = roofline_row(s, kH200Fp8, 1);
  EXPECT_DOUBLE_EQ(r.bytes, 8.0 * 2359872 + 12288);  // 18,891,264
  EXPECT_NEAR(r.t_mem_us, 3.93568, 1e-9);
  EXPECT_NEAR(r.t_compute_us, 0.0190756157, 1e-9);  // same FLOPs as bf16, twice the peak

  r = roofline_row(s, kH200Fp8, 64);
  EXPECT_NEAR(r.expected_experts, 222.4424876855104, 1e-9);
  EXPECT_NEAR(r.bytes, 525722230.2993808, 1e-3);
  EXPECT_NEAR(r.t_mem_us, 109.52546464570432, 1e-9);
}

TEST(Roofline, DeepSeekV3Fp8Block) {
  const MoeShape s = deepseek_v3_tp8();
  RooflineRow r = roofline_row(s, kH200Fp8, 1);
  EXPECT_DOUBLE_EQ(r.bytes, 8.0 * 5506368 + 2 * 7168 * 2);  // 44,079,616
  EXPECT_DOUBLE_EQ(r.flops, 6.0 * 8 * 256 * 7168);           // 88,080,384
  EXPECT_NEAR(r.t_mem_us, 9.183253333, 1e-8);

  r = roofline_row(s, kH200Fp8, 256);
  EXPECT_NEAR(r.expected_experts, 255.92441438744697, 1e-9);
  EXPECT_NEAR(r.t_mem_us, 295.115424542037, 1e-8);
  EXPECT_NEAR(r.t_compute_us, 11.394501139016624, 1e-9);
}

TEST(Roofline, ExpertParallelScalesFlopsByLocalShare) {
  MoeShape s = qwen_tp4(Dtype::bf16);
  s.E = 32;  // EP 8: 32 of 256 experts on this rank
  s.ep = 8;
  const RooflineRow r = roofline_row(s, kH200Bf16, 16);
  EXPECT_NEAR(r.expected_experts, 12.745270290173686, 1e-9);  // 32 * (1 - (31/32)^16)
  EXPECT_DOUBLE_EQ(r.flops, 6.0 * 16 * 8 * (32.0 / 256) * 256 * 3072);  // 75,497,472
  EXPECT_NEAR(r.t_mem_us, 12.57007050605234, 1e-9);
}

// ANCHORS.md's floors are active-expert weights (no scales, no activations) over the measured
// 4,234 GB/s copy bandwidth; ours over the same bandwidth are a little higher.
TEST(Roofline, ReproducesAnchorFloors) {
  const Ceilings anchor_bw{4.234e12, 989.4e12};
  struct Anchor {
    MoeShape shape;
    int M;
    double floor_us;
  };
  const Anchor anchors[] = {
      {qwen_tp4(Dtype::bf16), 1, 8.9},          {qwen_tp4(Dtype::bf16), 64, 247.9},
      {qwen_tp4(Dtype::bf16), 4096, 285.3},     {qwen_tp4(Dtype::fp8_w8a8, true), 1, 4.5},
      {qwen_tp4(Dtype::fp8_w8a8, true), 8, 32.0}, {deepseek_v3_tp8(), 1, 10.4},
      {deepseek_v3_tp8(), 64, 289.2},           {deepseek_v3_tp8(), 4096, 332.8},
  };
  for (const Anchor& a : anchors) {
    SCOPED_TRACE(a.M);
    const double weights_only_us = expected_active_experts(a.shape, a.M) * 3.0 * a.shape.N *
                                   a.shape.K * weight_bytes(a.shape.dtype) / 4.234e12 * 1e6;
    EXPECT_NEAR(weights_only_us, a.floor_us, 0.06);
    const double ours_us = roofline_row(a.shape, anchor_bw, a.M).t_mem_us;
    EXPECT_GT(ours_us, weights_only_us);
    EXPECT_LT(ours_us / weights_only_us, 1.10);  // activations: 8% at DeepSeek M=4096
  }
}

TEST(Roofline, CrossoverIsWhereTheBoundSwitches) {
  // Saturated: 48*N*K*M/peak = (256*3*N*K*2 + 4*K*M)/bw  =>  M = 7070.4 on the H200 in bf16.
  const MoeShape s = qwen_tp4(Dtype::bf16);
  const int m = crossover_M(s, kH200Bf16);
  EXPECT_EQ(m, 7071);
  EXPECT_EQ(roofline_row(s, kH200Bf16, m - 1).bound, "memory");
  EXPECT_EQ(roofline_row(s, kH200Bf16, m).bound, "compute");
  EXPECT_EQ(roofline_row(s, kH200Bf16, 2 * m).bound, "compute");
  EXPECT_GT(roofline_row(s, kH200Bf16, 2 * m).t_compute_us,
            roofline_row(s, kH200Bf16, 2 * m).t_mem_us);

  const MoeShape f = qwen_tp4(Dtype::fp8_w8a8, true);
  const int mf = crossover_M(f, kH200Fp8);
  EXPECT_EQ(mf, 7621);
  EXPECT_EQ(roofline_row(f, kH200Fp8, mf - 1).bound, "memory");
  EXPECT_EQ(roofline_row(f, kH200Fp8, mf).bound, "compute");
}

TEST(Roofline, CrossoverEdges) {
  const MoeShape s = qwen_tp4(Dtype::bf16);
  EXPECT_EQ(crossover_M(s, Ceilings{1e18, 1e12}), 1);   // bandwidth without limit
  EXPECT_EQ(crossover_M(s, Ceilings{4.8e12, 1e30}), -1);  // compute without limit
}

TEST(Roofline, BatchOfRowsKeepsOrder) {
  const auto rows = roofline(qwen_tp4(Dtype::bf16), kH200Bf16, {64, 1, 8});
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].M, 64);
  EXPECT_EQ(rows[1].M, 1);
  EXPECT_EQ(rows[2].M, 8);
  EXPECT_LT(rows[1].floor_us, rows[2].floor_us);
}

TEST(Roofline, SpecCeilingsPickTheDtypePeak) {
  const GpuSpec& h200 = require_gpu("H200");
  Ceilings c = spec_ceilings(qwen_tp4(Dtype::bf16), h200);
  EXPECT_DOUBLE_EQ(c.bandwidth_Bps, 4.8e12);
  EXPECT_DOUBLE_EQ(c.peak_flops, 989.4e12);
  EXPECT_DOUBLE_EQ(spec_ceilings(qwen_tp4(Dtype::fp8_w8a8), h200).peak_flops, 1978.9e12);
  EXPECT_DOUBLE_EQ(spec_ceilings(qwen_tp4(Dtype::fp8_w8a8, true), h200).peak_flops, 1978.9e12);
  try {
    spec_ceilings(qwen_tp4(Dtype::fp8_w8a8, true), require_gpu("A100"));
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "dtype");
    EXPECT_EQ(e.value(), "fp8_w8a8");
  }
}

TEST(Roofline, MeasuredCeilingsGiveTheMeasuredFloor) {
  const Ceilings c = measured_ceilings(4.234e12, 782e12);
  const RooflineRow r = roofline_row(qwen_tp4(Dtype::bf16), c, 1);
  EXPECT_NEAR(r.t_mem_us, 37761024 / 4.234e12 * 1e6, 1e-9);  // 8.918523
  EXPECT_THROW(measured_ceilings(0, 782e12), InputError);
  EXPECT_THROW(measured_ceilings(4.234e12, -1), InputError);
}

TEST(Roofline, PercentOfFloor) {
  const RooflineRow r = roofline_row(qwen_tp4(Dtype::bf16), kH200Bf16, 1);
  EXPECT_NEAR(pct_of_floor(r, 2 * 7.86688e-6), 50.0, 1e-9);
  EXPECT_THROW(pct_of_floor(r, 0), InputError);
}

TEST(Roofline, RejectsBadInput) {
  const MoeShape s = qwen_tp4(Dtype::bf16);
  try {
    roofline_row(s, kH200Bf16, 0);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "batch");
    EXPECT_EQ(e.value(), "0");
  }
  MoeShape bad = s;
  bad.topk = 0;
  EXPECT_THROW(roofline_row(bad, kH200Bf16, 1), InputError);
  bad = s;
  bad.E_global = 128;  // fewer than on this rank
  EXPECT_THROW(roofline_row(bad, kH200Bf16, 1), InputError);
}

}  // namespace
}  // namespace moetune
