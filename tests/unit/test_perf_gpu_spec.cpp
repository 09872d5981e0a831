#include "moetune/gpu_spec.hpp"

#include <gtest/gtest.h>

#include "moetune/error.hpp"

namespace moetune {
namespace {

TEST(GpuSpec, H200MatchesDesign) {
  const GpuSpec& g = require_gpu("NVIDIA H200");
  EXPECT_EQ(g.name, "NVIDIA H200");
  EXPECT_DOUBLE_EQ(g.mem_bandwidth_Bps, 4.8e12);
  EXPECT_DOUBLE_EQ(g.bf16_flops, 989.4e12);
  ASSERT_TRUE(g.fp8_flops.has_value());
  EXPECT_DOUBLE_EQ(*g.fp8_flops, 1978.9e12);
  EXPECT_EQ(g.sm_count, 132);
  EXPECT_EQ(g.smem_per_block_bytes, 232448);
  EXPECT_EQ(g.compute_capability(), 90);
}

TEST(GpuSpec, SharedMemoryPerArchitecture) {
  EXPECT_EQ(require_gpu("NVIDIA RTX PRO 6000 Blackwell Server Edition").smem_per_block_bytes,
            101376);
  EXPECT_EQ(require_gpu("NVIDIA RTX PRO 6000 Blackwell Workstation Edition").smem_per_block_bytes,
            101376);
  EXPECT_EQ(require_gpu("5090").smem_per_block_bytes, 101376);
  EXPECT_EQ(require_gpu("L40S").smem_per_block_bytes, 101376);
  EXPECT_EQ(require_gpu("A100").smem_per_block_bytes, 166912);
  EXPECT_EQ(require_gpu("B200").smem_per_block_bytes, 232448);
  EXPECT_EQ(require_gpu("H100").smem_per_block_bytes, 232448);
}

TEST(GpuSpec, LookupByCudaNameAndAliases) {
  const GpuSpec* h200 = find_gpu("NVIDIA H200");
  ASSERT_NE(h200, nullptr);
  EXPECT_EQ(find_gpu("H200"), h200);
  EXPECT_EQ(find_gpu("h200"), h200);
  EXPECT_EQ(find_gpu("NVIDIA_H200"), h200);  // as in a config file name
  EXPECT_EQ(find_gpu("nvidia-h200"), h200);
  EXPECT_EQ(find_gpu("  H200 "), h200);

  EXPECT_EQ(require_gpu("NVIDIA_H100_80GB_HBM3").name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(require_gpu("h100").name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(require_gpu("nvidia-h100").name, "NVIDIA H100 80GB HBM3");  // vendor + alias
  EXPECT_EQ(require_gpu("NVIDIA RTX 5090").name, "NVIDIA GeForce RTX 5090");
  EXPECT_EQ(require_gpu("H20").name, "NVIDIA H20");
  EXPECT_EQ(require_gpu("NVIDIA H100 PCIe").sm_count, 114);
  EXPECT_EQ(require_gpu("h200-nvl").name, "NVIDIA H200 NVL");
  EXPECT_DOUBLE_EQ(require_gpu("NVIDIA_H200_NVL").mem_bandwidth_Bps, 4.8e12);
  EXPECT_EQ(require_gpu("H800").arch(), "sm_90a");
  EXPECT_EQ(require_gpu("b200").name, "NVIDIA B200");
  EXPECT_EQ(require_gpu("rtx-pro-6000").name, "NVIDIA RTX PRO 6000 Blackwell Server Edition");
  EXPECT_EQ(require_gpu("NVIDIA_RTX_PRO_6000_Blackwell_Workstation_Edition").name,
            "NVIDIA RTX PRO 6000 Blackwell Workstation Edition");
  EXPECT_EQ(require_gpu("rtx_pro_6000_ws").name,
            "NVIDIA RTX PRO 6000 Blackwell Workstation Edition");
  EXPECT_EQ(require_gpu("5090").name, "NVIDIA GeForce RTX 5090");
  EXPECT_EQ(require_gpu("NVIDIA_GeForce_RTX_5090").name, "NVIDIA GeForce RTX 5090");
  EXPECT_EQ(require_gpu("l40s").name, "NVIDIA L40S");
  EXPECT_EQ(require_gpu("A100").name, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(require_gpu("NVIDIA_A100-SXM4-80GB").name, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(require_gpu("a100_sxm4_40gb").name, "NVIDIA A100-SXM4-40GB");
  // Grace Hopper, by the driver's names (as in vLLM's config file names): the H100 SXM's GPU with
  // 96 GB HBM3 at 4 TB/s (480 GB or 120 GB of CPU memory) or 144 GB HBM3e at 4.9 TB/s.
  EXPECT_EQ(require_gpu("NVIDIA_GH200_480GB").name, "NVIDIA GH200 480GB");
  EXPECT_EQ(require_gpu("gh200").name, "NVIDIA GH200 480GB");
  EXPECT_DOUBLE_EQ(require_gpu("NVIDIA GH200 120GB").mem_bandwidth_Bps, 4.0e12);
  EXPECT_DOUBLE_EQ(require_gpu("NVIDIA_GH200_96GB").mem_bandwidth_Bps, 4.0e12);
  EXPECT_DOUBLE_EQ(require_gpu("NVIDIA_GH200_144G_HBM3e").mem_bandwidth_Bps, 4.9e12);
  EXPECT_EQ(require_gpu("GH200-144GB").sm_count, 132);
  EXPECT_EQ(require_gpu("GH200").fp8_flops, require_gpu("H100").fp8_flops);
}

TEST(GpuSpec, UnknownGpu) {
  EXPECT_EQ(find_gpu("H300"), nullptr);
  EXPECT_EQ(find_gpu(""), nullptr);
  EXPECT_EQ(find_gpu("NVIDIA"), nullptr);
  try {
    require_gpu("Tesla V100");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "gpu");
    EXPECT_EQ(e.value(), "Tesla V100");
    EXPECT_NE(e.reason().find("unknown GPU; known: H200, H100"), std::string::npos) << e.reason();
    EXPECT_NE(e.reason().find("5090"), std::string::npos) << e.reason();
  }
}

TEST(GpuSpec, EveryNameAndAliasFindsItsOwnEntry) {
  for (const GpuSpec& g : gpu_specs()) {
    EXPECT_EQ(find_gpu(g.name), &g) << g.name;
    for (const std::string& a : g.aliases) EXPECT_EQ(find_gpu(a), &g) << a;
  }
}

TEST(GpuSpec, EveryEntryIsComplete) {
  ASSERT_GE(gpu_specs().size(), 13u);
  for (const GpuSpec& g : gpu_specs()) {
    SCOPED_TRACE(g.name);
    EXPECT_FALSE(g.aliases.empty());
    EXPECT_GT(g.mem_bandwidth_Bps, 5e11);
    EXPECT_GT(g.bf16_flops, 1e14);
    EXPECT_GT(g.fp16_flops, 1e14);
    EXPECT_GT(g.sm_count, 0);
    EXPECT_GT(g.smem_per_block_bytes, 0);
    EXPECT_GT(g.l2_bytes, 0);
    EXPECT_GE(g.compute_capability(), 80);
    EXPECT_FALSE(g.source.empty());
    // fp8 tensor cores exist from sm_89, and then at twice the bf16 rate.
    const bool has_fp8 = g.compute_capability() >= min_compute_capability(Dtype::fp8_w8a8);
    EXPECT_EQ(g.fp8_flops.has_value(), has_fp8);
    if (has_fp8) {
      EXPECT_NEAR(*g.fp8_flops / g.bf16_flops, 2.0, 0.03);
    }
  }
}

TEST(GpuSpec, PeakFlopsPerDtype) {
  const GpuSpec& a100 = require_gpu("A100");
  EXPECT_FALSE(a100.peak_flops(Dtype::fp8_w8a8).has_value());
  EXPECT_DOUBLE_EQ(*a100.peak_flops(Dtype::bf16), 312e12);
  EXPECT_DOUBLE_EQ(*a100.peak_flops(Dtype::fp16), 312e12);
  const GpuSpec& l40s = require_gpu("L40S");
  EXPECT_DOUBLE_EQ(*l40s.peak_flops(Dtype::fp8_w8a8), 733e12);
  // GeForce: fp32-accumulate rate, half the fp16-accumulate marketing number.
  EXPECT_DOUBLE_EQ(*require_gpu("5090").peak_flops(Dtype::bf16), 209.5e12);
}

TEST(GpuSpec, ArchStrings) {
  EXPECT_EQ(require_gpu("H200").arch(), "sm_90a");
  EXPECT_EQ(require_gpu("H100").arch(), "sm_90a");
  EXPECT_EQ(require_gpu("H20").arch(), "sm_90a");
  EXPECT_EQ(require_gpu("B200").arch(), "sm_100a");
  EXPECT_EQ(require_gpu("rtx-pro-6000").arch(), "sm_120");
  EXPECT_EQ(require_gpu("5090").arch(), "sm_120");
  EXPECT_EQ(require_gpu("L40S").arch(), "sm_89");
  EXPECT_EQ(require_gpu("A100").arch(), "sm_80");
}

// gpu_for_arch: the GPU as the config rules see it for another build target. Hopper's plain
// "sm_90" (no wgmma) must not read back as "sm_90a".
TEST(GpuSpec, ForArchTakesTheTargetAndItsComputeCapability) {
  const GpuSpec& h200 = require_gpu("H200");
  EXPECT_EQ(gpu_for_arch(h200, "").arch(), "sm_90a");
  EXPECT_EQ(gpu_for_arch(h200, "sm_90a").target_arch, "");  // its own: unchanged
  const GpuSpec sm90 = gpu_for_arch(h200, "sm_90");
  EXPECT_EQ(sm90.arch(), "sm_90");
  EXPECT_EQ(sm90.compute_capability(), 90);
  EXPECT_EQ(sm90.sm_count, h200.sm_count);  // the hardware numbers stay
  const GpuSpec sm89 = gpu_for_arch(h200, "sm_89");
  EXPECT_EQ(sm89.arch(), "sm_89");
  EXPECT_EQ(sm89.compute_capability(), 89);
  EXPECT_EQ(gpu_for_arch(h200, "compute_90").arch(), "compute_90");
  EXPECT_EQ(gpu_for_arch(h200, "compute_90").compute_capability(), 90);
  const GpuSpec& a100 = require_gpu("A100");
  EXPECT_EQ(gpu_for_arch(a100, "sm_100a").compute_capability(), 100);
  EXPECT_EQ(gpu_for_arch(a100, "sm_100a").arch(), "sm_100a");
  // Digits it cannot read leave the compute capability as it was.
  EXPECT_EQ(gpu_for_arch(a100, "sm_x").compute_capability(), 80);
  EXPECT_GT(gpu_for_arch(a100, "sm_99999999999").compute_capability(), 0);  // no int overflow
}

TEST(GpuSpec, ArchComputeCapability) {
  EXPECT_EQ(arch_compute_capability("sm_89"), 89);
  EXPECT_EQ(arch_compute_capability("sm_90a"), 90);
  EXPECT_EQ(arch_compute_capability("sm_100a"), 100);
  EXPECT_EQ(arch_compute_capability("compute_90"), 90);
  for (const char* a : {"", "sm_", "90", "compute_", "gfx90a"})
    EXPECT_EQ(arch_compute_capability(a), std::nullopt) << a;
}

TEST(GpuSpec, FallbackIsInTheTable) {
  EXPECT_EQ(require_gpu(kFallbackGpu).name, "NVIDIA H200");
}

}  // namespace
}  // namespace moetune
