// `moetune kernels --compile-only`'s kernel set compiles with NVRTC for every target, without a
// GPU (src/moe/check.cpp kernel_specs_for_compile_only).
#include <algorithm>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "cuda/jit.hpp"
#include "moe/check.hpp"
#include "moe/stages.hpp"
#include "moetune/error.hpp"
#include "moetune/fused_moe.hpp"

namespace moetune::moe {
namespace {

TEST(MoeCompileOnly, SetCoversEveryKernel) {
  const auto specs = kernel_specs_for_compile_only("sm_90a");
  std::set<std::string> files;
  for (const auto& s : specs) files.insert(s.file);
  for (const char* f : {"routing.cuh", "moe_align.cuh", "moe_route_align.cuh", "quant_fp8_amax.cuh",
                        "quant_fp8_group.cuh", "silu_mul.cuh", "topk_reduce.cuh",
                        "moe_gemm_mma.cuh", "moe_decode.cuh"})
    EXPECT_TRUE(files.count(f)) << f;
  // sm_90a: the wgmma kernel in every dtype, block fp8 warp-specialized (up) and not (down).
  std::set<std::string> names;
  for (const auto& s : specs) names.insert(s.name);
  for (const char* n : {"moe_gemm_up_bf16_wgmma_m64n128k64", "moe_gemm_up_fp8b_wgmma_m64n128k128",
                        "moe_gemm_down_fp8b_wgmma_m64n128k128", "moe_gemm_up_fp8t_wgmma_m64n128k128"}) {
    EXPECT_TRUE(std::any_of(names.begin(), names.end(),
                            [&](const std::string& x) { return x.rfind(n, 0) == 0; }))
        << n;
  }
  // sm_80 has no fp8 tensor cores: no fp8 GEMM in its set.
  for (const auto& s : kernel_specs_for_compile_only("sm_80"))
    if (s.file == "moe_gemm_mma.cuh") {
      EXPECT_EQ(s.name.find("fp8"), std::string::npos) << s.name;
    }
}

// GEMM1 with SiLU(gate)·up fused (FUSED_ACT = 1) is in every target's set, bf16 and fp16, on the
// mma.sync kernel and (sm_90a) the wgmma kernel; block fp8 on sm_90a's swap-AB wgmma kernel only;
// never per-tensor fp8.
TEST(MoeCompileOnly, SetHasTheFusedActivationGemm) {
  for (const char* arch : {"sm_80", "sm_89", "sm_90a", "sm_120"}) {
    std::set<std::string> fused;
    for (const auto& s : kernel_specs_for_compile_only(arch)) {
      bool act = false;
      for (const auto& [k, v] : s.template_args)
        if (k == "FUSED_ACT" && v == "1") act = true;
      EXPECT_EQ(act, s.name.find("moe_gemm_up_act_") == 0) << s.name;
      if (!act) continue;
      // fp8: block-wise only, on the swap-AB (wgmma, sm_90a) kernel.
      EXPECT_EQ(s.name.find("fp8t"), std::string::npos) << s.name;
      if (s.name.find("fp8b") != std::string::npos) {
        EXPECT_EQ(s.file, "moe_gemm_wgmma_sm90a.cuh") << s.name;
      }
      fused.insert(s.file + " " + s.name.substr(std::string("moe_gemm_up_act_").size(), 4));
    }
    EXPECT_TRUE(fused.count("moe_gemm_mma.cuh bf16")) << arch;
    EXPECT_TRUE(fused.count("moe_gemm_mma.cuh fp16")) << arch;
    if (std::string(arch) == "sm_90a") {
      EXPECT_TRUE(fused.count("moe_gemm_wgmma_sm90a.cuh bf16")) << arch;
      EXPECT_TRUE(fused.count("moe_gemm_wgmma_sm90a.cuh fp16")) << arch;
      EXPECT_TRUE(fused.count("moe_gemm_wgmma_sm90a.cuh fp8b")) << arch;
    }
  }
}

class MoeCompileArch : public ::testing::TestWithParam<const char*> {};

TEST_P(MoeCompileArch, EveryKernelCompiles) {
  const auto specs = kernel_specs_for_compile_only(GetParam());
  const auto compiled = cuda::Jit::instance().compile_many(specs);
  ASSERT_EQ(compiled.size(), specs.size());
  for (const auto& c : compiled) {
    EXPECT_FALSE(c.cubin.empty()) << c.spec.name << ": " << c.log;
    EXPECT_FALSE(c.lowered_name.empty()) << c.spec.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, MoeCompileArch,
                         ::testing::Values("sm_80", "sm_89", "sm_90a", "sm_120"));

// Programmatic dependent launch (kernels/common/pdl.cuh): every kernel the layer launches waits
// for the previous grid (griddepcontrol.wait) and releases its dependents on sm_90 and newer; below
// sm_90 both calls compile to nothing. One instance of each kernel file of the compile-only set.
class MoePdlPtx : public ::testing::TestWithParam<const char*> {};

TEST_P(MoePdlPtx, GriddepcontrolExactlyFromSm90) {
  const std::string arch = GetParam();
  const bool pdl = std::string(arch) == "sm_90a" || std::string(arch) == "sm_120";
  ASSERT_EQ(arch_supports_pdl(arch), pdl);
  std::map<std::string, cuda::KernelSpec> one_per_file;
  for (const auto& s : kernel_specs_for_compile_only(arch)) one_per_file.emplace(s.file, s);
  std::set<std::string> files = {"routing.cuh",         "moe_align.cuh",  "moe_route_align.cuh",
                                 "quant_fp8_amax.cuh",  "quant_fp8_group.cuh", "silu_mul.cuh",
                                 "topk_reduce.cuh",     "moe_gemm_mma.cuh"};
  if (arch == "sm_90a") files.insert("moe_gemm_wgmma_sm90a.cuh");
  for (const std::string& f : files) {
    auto it = one_per_file.find(f);
    ASSERT_NE(it, one_per_file.end()) << f;
    const std::string ptx = cuda::kernel_ptx(it->second);
    ASSERT_NE(ptx.find(".entry"), std::string::npos) << it->second.name;
    EXPECT_EQ(ptx.find("griddepcontrol.wait") != std::string::npos, pdl)
        << it->second.name << " on " << arch;
    EXPECT_EQ(ptx.find("griddepcontrol.launch_dependents") != std::string::npos, pdl)
        << it->second.name << " on " << arch;
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, MoePdlPtx,
                         ::testing::Values("sm_80", "sm_89", "sm_90a", "sm_120"));

TEST(MoePdlArch, FromSm90) {
  for (const char* a : {"sm_90", "sm_90a", "sm_100a", "sm_120", "sm_121a"})
    EXPECT_TRUE(arch_supports_pdl(a)) << a;
  for (const char* a : {"sm_80", "sm_86", "sm_89", "", "sm_", "compute_90", "90"})
    EXPECT_FALSE(arch_supports_pdl(a)) << a;
}

TEST(MoeStageSpecs, NamesCarryTheirParameters) {
  MoeShape s;
  s.E = s.E_global = 256;
  s.N = 256;
  s.K = 7168;
  s.topk = 8;
  s.routing.scoring = "sigmoid";
  s.routing.n_group = 8;
  s.routing.topk_group = 4;
  s.routing.correction_bias = true;
  const auto r = routing_spec(s, "sm_90a");
  EXPECT_EQ(r.name, "moe_routing_sigmoid_e256_top8_g4of8_bias_renorm");
  EXPECT_EQ(r.name_expression(), "moetune::moe_routing<256, 8, 1, 8, 4, true, true, 4, 0, 0>");
  EXPECT_EQ(align_spec(64, 256, "sm_90a").name, "moe_align_m64_t256");
  // Routing and alignment in one block: the routing's parameters (no WARPS), then the
  // alignment's, its block and its slot table.
  const auto ra = route_align_spec(s, 16, "sm_90a");
  EXPECT_EQ(ra.name, "moe_route_align_sigmoid_e256_top8_g4of8_bias_renorm_m16");
  EXPECT_EQ(ra.name_expression(),
            "moetune::moe_route_align<256, 8, 1, 8, 4, true, true, 16, 256, 512, 512, 0, 0>");
  // Block fp8: the spare blocks quantize the hidden states (ACT bf16 = 0, its block_k).
  MoeShape q = s;
  q.dtype = Dtype::fp8_w8a8;
  q.block_shape = std::array<int, 2>{128, 128};
  EXPECT_EQ(routing_spec(q, "sm_90a", true).name,
            "moe_routing_sigmoid_e256_top8_g4of8_bias_renorm_q128");
  EXPECT_EQ(routing_spec(q, "sm_90a", true).name_expression(),
            "moetune::moe_routing<256, 8, 1, 8, 4, true, true, 4, 0, 128>");
  EXPECT_EQ(route_align_spec(q, 16, "sm_90a", true).name_expression(),
            "moetune::moe_route_align<256, 8, 1, 8, 4, true, true, 16, 256, 512, 512, 0, 128>");
  EXPECT_THROW(routing_spec(s, "sm_90a", true), InputError);  // bf16 has nothing to quantize
  EXPECT_TRUE(route_align_fits(s, 1));
  EXPECT_TRUE(route_align_fits(s, 5));    // measured faster up to M = 5
  EXPECT_FALSE(route_align_fits(s, 6));   // M = 6..8 no faster, M = 32 slower
  EXPECT_FALSE(route_align_fits(s, 0));
  MoeShape wide = s;
  wide.topk = 128;
  EXPECT_TRUE(route_align_fits(wide, 4));   // 512 slots
  EXPECT_FALSE(route_align_fits(wide, 5));  // past the shared id table
  EXPECT_EQ(topk_reduce_spec(s, "sm_90a").name, "topk_reduce_bf16_k7168_top8");
  // Block fp8's activation stage: SiLU·up and its quantization in one kernel, the group a
  // template argument; other dtypes keep silu_mul (and per-tensor fp8 its amax pass).
  MoeShape f8 = s;
  f8.dtype = Dtype::fp8_w8a8;
  f8.block_shape = std::array<int, 2>{128, 128};
  const auto sq = silu_mul_quant_spec(f8, "sm_90a");
  EXPECT_EQ(sq.name, "silu_mul_quant_group128_bf16_n256");
  EXPECT_EQ(sq.name_expression(), "moetune::silu_mul_quant_group<0, 256, 128, 256>");
  EXPECT_THROW(silu_mul_quant_spec(s, "sm_90a"), InputError);  // bf16
  f8.block_shape.reset();
  EXPECT_THROW(silu_mul_quant_spec(f8, "sm_90a"), InputError);  // per tensor
}

TEST(MoeStageSpecs, RefusesShapesTheKernelsCannotRun) {
  MoeShape s;
  s.E = s.E_global = 1024;
  s.N = 256;
  s.K = 3072;
  s.topk = 8;
  EXPECT_THROW(check_stage_shape(s, 0), InputError);  // E per rank > 512
  s.E = 256;
  s.N = 100;
  EXPECT_THROW(check_stage_shape(s, 0), InputError);  // N % 8
  s.N = 256;
  EXPECT_THROW(check_stage_shape(s, 4), InputError);  // rank past E_global / E
  EXPECT_NO_THROW(check_stage_shape(s, 3));
}

}  // namespace
}  // namespace moetune::moe
