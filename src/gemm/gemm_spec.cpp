// Kernel spec, instance name, workspace and launch geometry of the grouped expert GEMM. No GPU.
#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "gemm/gemm.hpp"
#include "kernels/common/tile_math.cuh"
#include "moetune/error.hpp"

namespace moetune::gemm {
namespace {

namespace tm = tile_math;

bool is_up(GemmStage s) { return s == GemmStage::up || s == GemmStage::up_act; }

int dtype_code(const MoeShape& shape) {
  switch (shape.dtype) {
    case Dtype::bf16: return tm::kDtypeBf16;
    case Dtype::fp16: return tm::kDtypeFp16;
    case Dtype::fp8_w8a8: return shape.block_shape ? tm::kDtypeFp8Block : tm::kDtypeFp8Tensor;
  }
  return tm::kDtypeBf16;
}

const char* dtype_tag(int code) {
  switch (code) {
    case tm::kDtypeFp16: return "fp16";
    case tm::kDtypeFp8Block: return "fp8b";
    case tm::kDtypeFp8Tensor: return "fp8t";
    default: return "bf16";
  }
}

// "sm_90a" -> 90; throws InputError for anything else.
int arch_cc(const std::string& arch) {
  if (arch.rfind("sm_", 0) == 0) {
    std::size_t i = 3;
    int cc = 0;
    while (i < arch.size() && arch[i] >= '0' && arch[i] <= '9') cc = cc * 10 + (arch[i++] - '0');
    if (i > 3) return cc;
  }
  throw InputError("arch", arch, "expected sm_<major><minor>[a], e.g. sm_90a");
}

int n_out(const MoeShape& s, GemmStage st) { return is_up(st) ? 2 * s.N : s.K; }
int k_red(const MoeShape& s, GemmStage st) { return is_up(st) ? s.K : s.N; }

// tile_math::gemm_act_violation for this shape and config; slice: the warp's (mma.sync) or
// warpgroup's (wgmma) column slice that pairs gate and up.
const char* act_violation(const MoeShape& shape, const KernelConfig& c, int slice) {
  const int group = shape.block_shape ? (*shape.block_shape)[1] : 0;
  return tm::gemm_act_violation(true, dtype_code(shape), shape.N, slice, c.SWAP_AB == 1,
                                c.BLOCK_SIZE_N, group);
}

// The slice of gemm_act_violation: one warp's (mma.sync) or warpgroup's (wgmma) columns.
int act_slice(const MoeShape& shape, const KernelConfig& c, const std::string& arch) {
  if (c.SWAP_AB == 1) return c.BLOCK_SIZE_N / std::max(1, c.num_warps / 4);  // rows per warpgroup
  if (gemm_uses_wgmma(shape, c, arch)) {
    const int wg_m = tm::gemm_wg_m(c.BLOCK_SIZE_M, c.BLOCK_SIZE_N, c.num_warps);
    return c.BLOCK_SIZE_N / std::max(1, c.num_warps / 4 / std::max(1, wg_m));
  }
  const int warps_m = tm::gemm_warps_m(c.BLOCK_SIZE_M, c.BLOCK_SIZE_N, c.num_warps);
  return c.BLOCK_SIZE_N / std::max(1, c.num_warps / std::max(1, warps_m));
}

void check_config(const MoeShape& shape, const KernelConfig& c, GemmStage stage,
                  const std::string& arch) {
  if (shape.E <= 0 || shape.N <= 0 || shape.K <= 0 || shape.topk <= 0)
    throw InputError("shape", fmt::format("E={},N={},K={},topk={}", shape.E, shape.N, shape.K,
                                          shape.topk),
                     "E, N, K and topk must be positive");
  const int bytes = weight_bytes(shape.dtype);
  const bool block = dtype_code(shape) == tm::kDtypeFp8Block;
  if (const char* why = tm::tile_rule_violation(c.BLOCK_SIZE_M, c.BLOCK_SIZE_N, c.BLOCK_SIZE_K,
                                                c.num_warps, c.num_stages, c.SPLIT_K, bytes,
                                                bytes, block))
    throw InputError("config", config_name(c), why);
  if (c.GROUP_SIZE_M < 1)
    throw InputError("GROUP_SIZE_M", std::to_string(c.GROUP_SIZE_M), "must be >= 1");
  if (c.SWAP_AB != 0 && c.SWAP_AB != 1)
    throw InputError("SWAP_AB", std::to_string(c.SWAP_AB), "must be 0 or 1");
  if (c.SWAP_AB == 1) {
    if (arch != "sm_90a")
      throw InputError("SWAP_AB", "1",
                       fmt::format("runs on Hopper's wgmma: sm_90a only, not {}", arch));
    if (const char* why = tm::gemm_swapab_violation(c.BLOCK_SIZE_M, c.BLOCK_SIZE_N,
                                                    c.BLOCK_SIZE_K, c.num_warps, bytes, block,
                                                    stage == GemmStage::up_act))
      throw InputError("config", config_name(c), why);
    if (block && (*shape.block_shape)[0] % 64 != 0)
      throw InputError("block_shape", fmt::format("[{}, {}]", (*shape.block_shape)[0],
                                                  (*shape.block_shape)[1]),
                       "SWAP_AB=1 needs block_n a multiple of 64 (one scale per m64 slice)");
  }
  if (stage == GemmStage::down_sum && arch_cc(arch) < 90)
    throw InputError("stage", "down_sum",
                     fmt::format("the top-k sum's atomic adds of bf16/fp16 need sm_90+, not {}",
                                 arch));
  if (shape.dtype == Dtype::fp8_w8a8 && arch_cc(arch) < 89)
    throw InputError("dtype", "fp8_w8a8", fmt::format("fp8 tensor cores need sm_89+, not {}", arch));
  if (static_cast<long long>(k_red(shape, stage)) * bytes % 16 != 0)
    throw InputError(is_up(stage) ? "K" : "N", std::to_string(k_red(shape, stage)),
                     "rows must be whole 16-byte chunks");
  const int k_tiles = tm::ceil_div(k_red(shape, stage), c.BLOCK_SIZE_K);
  if (c.SPLIT_K > k_tiles)
    throw InputError("SPLIT_K", std::to_string(c.SPLIT_K),
                     fmt::format("more than the {} K-tiles of BLOCK_SIZE_K {}", k_tiles,
                                 c.BLOCK_SIZE_K));
  if (stage == GemmStage::up_act) {
    const int slice = act_slice(shape, c, arch);
    if (const char* why = act_violation(shape, c, slice)) {
      // The field of the first rule broken, in tile_math::gemm_act_violation's order.
      const bool slice_ok = slice >= 16 && slice % 16 == 0;
      if (dtype_code(shape) == tm::kDtypeFp8Tensor) throw InputError("stage", "up_act", why);
      if (shape.N % 8 != 0) throw InputError("N", std::to_string(shape.N), why);
      if (slice_ok && block && c.SWAP_AB != 1)
        throw InputError("SWAP_AB", std::to_string(c.SWAP_AB), why);
      if (slice_ok && block && (*shape.block_shape)[1] % 128 != 0)
        throw InputError("block_shape", fmt::format("[{}, {}]", (*shape.block_shape)[0],
                                                    (*shape.block_shape)[1]),
                         why);
      if (slice_ok && block && shape.N % (*shape.block_shape)[1] != 0)
        throw InputError("N", std::to_string(shape.N), why);
      throw InputError("BLOCK_SIZE_N", std::to_string(c.BLOCK_SIZE_N),
                       fmt::format("{} (slice of {} columns)", why, slice));
    }
  }
  if (block) {
    const auto [bn, bk] = *shape.block_shape;
    if (bk % c.BLOCK_SIZE_K != 0)
      throw InputError("BLOCK_SIZE_K", std::to_string(c.BLOCK_SIZE_K),
                       fmt::format("must divide block_k {} (a K-tile never straddles a scale group)", bk));
    if (bn % 8 != 0 || !(bn % c.BLOCK_SIZE_N == 0 || c.BLOCK_SIZE_N % bn == 0))
      throw InputError("BLOCK_SIZE_N", std::to_string(c.BLOCK_SIZE_N),
                       fmt::format("must divide block_n {} or be a multiple of it", bn));
    if (k_red(shape, stage) % bk != 0 || n_out(shape, stage) % bn != 0)
      throw InputError("block_shape", fmt::format("[{}, {}]", bn, bk),
                       "N and K must be multiples of the fp8 scale block");
  }
}

}  // namespace

const char* to_string(GemmStage s) {
  switch (s) {
    case GemmStage::up: return "up";
    case GemmStage::down: return "down";
    case GemmStage::up_act: return "up_act";
    case GemmStage::down_sum: return "down_sum";
  }
  return "?";
}

bool gemm_stage_is_up(GemmStage s) { return is_up(s); }

int gemm_out_cols(const MoeShape& shape, GemmStage s) {
  return s == GemmStage::up_act ? shape.N : n_out(shape, s);
}

bool gemm1_fuse_band(const MoeShape& shape, int64_t M) {
  const int64_t experts = std::max<int64_t>(1, std::max(shape.E_global, shape.E));
  return M * shape.topk <= kFuseActMaxSlotsPerExpert * experts;
}

GemmStage gemm1_stage(const MoeShape& shape, int64_t M, const KernelConfig& up) {
  if (!gemm1_fuse_band(shape, M)) return GemmStage::up;
  const int code = dtype_code(shape);
  if (code == tm::kDtypeFp8Tensor) return GemmStage::up;
  // Unswapped: every 16-bit tile the tile rules accept fuses (its warp or warpgroup slices are
  // whole n8 pairs); block fp8 fuses on the swap-AB path only.
  if (up.SWAP_AB != 1) return code == tm::kDtypeFp8Block ? GemmStage::up : GemmStage::up_act;
  // Swap-AB (sm_90a wherever it runs at all): a gate and an up slice per warpgroup, and for
  // block fp8 whole quantization groups per block. (validate_config admits only the 16-bit
  // swap-AB tiles that fuse: config/kernel_rules.hpp.)
  const bool fusable =
      act_violation(shape, up, act_slice(shape, up, "sm_90a")) == nullptr &&
      tm::gemm_swapab_violation(up.BLOCK_SIZE_M, up.BLOCK_SIZE_N, up.BLOCK_SIZE_K, up.num_warps,
                                weight_bytes(shape.dtype), code == tm::kDtypeFp8Block,
                                true) == nullptr;
  return fusable ? GemmStage::up_act : GemmStage::up;
}

bool gemm_uses_wgmma(const MoeShape& shape, const KernelConfig& c, const std::string& arch) {
  const int bytes = weight_bytes(shape.dtype);
  if (arch != "sm_90a") return false;
  if (c.SWAP_AB == 1) return true;  // check_config has refused what swap-AB cannot run
  return tm::gemm_wgmma_eligible(c.BLOCK_SIZE_M, c.BLOCK_SIZE_N, c.BLOCK_SIZE_K, c.num_warps,
                                 bytes, dtype_code(shape) == tm::kDtypeFp8Block);
}

const char* gemm_inline_align_violation(const MoeShape& shape, const KernelConfig& c,
                                        GemmStage stage, int64_t M, const std::string& arch) {
  if (!is_up(stage)) return "only GEMM1 (an up stage) derives the alignment";
  if (c.SPLIT_K != 1) return "split-K needs the alignment launch to zero its counters";
  if (!gemm_uses_wgmma(shape, c, arch)) return "only the sm_90a (wgmma) kernel derives it";
  if (M * shape.topk > tm::kInlineAlignMaxSlots)
    return "more than tile_math::kInlineAlignMaxSlots slots (M * topk)";
  if (shape.E > tm::kInlineAlignMaxE) return "more than tile_math::kInlineAlignMaxE local experts";
  return nullptr;
}

cuda::KernelSpec gemm_kernel_spec(const MoeShape& shape, const KernelConfig& c, GemmStage stage,
                                  const std::string& arch, bool inline_align) {
  if (inline_align)
    if (const char* why = gemm_inline_align_violation(shape, c, stage, 1, arch))
      throw InputError("inline_align", "true", why);
  check_config(shape, c, stage, arch);
  const int code = dtype_code(shape);
  const bool block = code == tm::kDtypeFp8Block;
  const int bn = block ? (*shape.block_shape)[0] : 0;
  const int bk = block ? (*shape.block_shape)[1] : 0;
  const bool wgmma = gemm_uses_wgmma(shape, c, arch);
  cuda::KernelSpec spec;
  spec.file = wgmma ? "moe_gemm_wgmma_sm90a.cuh" : "moe_gemm_mma.cuh";
  spec.kernel = wgmma ? "moetune::moe_gemm_wgmma" : "moetune::moe_gemm_mma";
  spec.arch = arch;
  auto arg = [&](const char* name, int v) { spec.template_args.emplace_back(name, std::to_string(v)); };
  arg("STAGE", is_up(stage) ? tm::kStageUp : tm::kStageDown);
  arg("DTYPE", code);
  arg("N", shape.N);
  arg("K", shape.K);
  arg("TOPK", shape.topk);
  arg("SCALE_BLOCK_N", bn);
  arg("SCALE_BLOCK_K", bk);
  arg("BLOCK_SIZE_M", c.BLOCK_SIZE_M);
  arg("BLOCK_SIZE_N", c.BLOCK_SIZE_N);
  arg("BLOCK_SIZE_K", c.BLOCK_SIZE_K);
  arg("GROUP_SIZE_M", c.GROUP_SIZE_M);
  arg("num_warps", c.num_warps);
  arg("num_stages", c.num_stages);
  arg("SPLIT_K", c.SPLIT_K);
  arg("FUSED_ACT", stage == GemmStage::up_act ? 1 : 0);
  if (wgmma) arg("SWAP_AB", c.SWAP_AB);
  arg("SUM_TOPK", stage == GemmStage::down_sum ? 1 : 0);
  if (wgmma) arg("ALIGN_E", inline_align ? shape.E : 0);
  spec.name = fmt::format("moe_gemm_{}_{}{}_{}_N{}_K{}_topk{}", to_string(stage), dtype_tag(code),
                          wgmma ? "_wgmma" : "", config_name(c), shape.N, shape.K, shape.topk);
  if (block) spec.name += fmt::format("_b{}x{}", bn, bk);
  if (inline_align) spec.name += fmt::format("_ia{}", shape.E);
  return spec;
}

int64_t gemm_max_m_blocks(const MoeShape& shape, const KernelConfig& c, int64_t M,
                          int64_t max_num_tokens_padded) {
  if (M <= 0 || c.BLOCK_SIZE_M <= 0) return 0;
  const int64_t slots = M * shape.topk;
  const int64_t experts = std::max<int64_t>(shape.E, shape.E_global);  // EP: foreign experts too
  const int64_t by_slots = (slots + c.BLOCK_SIZE_M - 1) / c.BLOCK_SIZE_M + std::min(experts, slots);
  // Whole blocks only: num_tokens_post_padded is a multiple of BLOCK_SIZE_M and at most the
  // capacity, so a partial last block never has work, and the kernels read a block's table
  // entries before they test the total (they must lie within the tables).
  const int64_t by_capacity = max_num_tokens_padded / c.BLOCK_SIZE_M;
  return std::min(by_slots, by_capacity);
}

GemmLaunch gemm_launch_geometry(const MoeShape& shape, const KernelConfig& c, GemmStage stage,
                                int64_t M, int64_t max_num_tokens_padded, const std::string& arch) {
  const int bytes = weight_bytes(shape.dtype);
  const int64_t n_tiles = tm::ceil_div(n_out(shape, stage), c.BLOCK_SIZE_N);
  const int64_t tiles = gemm_max_m_blocks(shape, c, M, max_num_tokens_padded) * n_tiles;
  if (tiles > 0x7fffffffLL)
    throw InputError("M", std::to_string(M), "grid larger than 2^31-1 blocks");
  GemmLaunch g;
  g.grid = {static_cast<unsigned>(tiles), static_cast<unsigned>(c.SPLIT_K), 1};
  const bool ws = tm::gemm_wgmma_warp_specialized(dtype_code(shape) == tm::kDtypeFp8Block,
                                                  k_red(shape, stage), c.BLOCK_SIZE_K, c.SPLIT_K);
  g.block = {static_cast<unsigned>(gemm_uses_wgmma(shape, c, arch)
                                       ? tm::gemm_wgmma_block_threads(c.num_warps, ws)
                                       : 32 * c.num_warps),
             1, 1};
  g.smem_bytes = static_cast<std::size_t>(tm::gemm_smem_bytes(
      c.BLOCK_SIZE_M, c.BLOCK_SIZE_N, c.BLOCK_SIZE_K, c.num_stages, bytes, bytes,
      dtype_code(shape) == tm::kDtypeFp8Block));
  return g;
}

namespace {
std::size_t counters_for_tiles(const KernelConfig& c, int64_t tiles) {
  if (c.SPLIT_K <= 1 || tiles <= 0) return 0;
  return (static_cast<std::size_t>(tiles) * 4 + 255) / 256 * 256;
}
std::size_t workspace_for_tiles(const KernelConfig& c, int64_t tiles) {
  if (c.SPLIT_K <= 1 || tiles <= 0) return 0;
  return counters_for_tiles(c, tiles) + static_cast<std::size_t>(tiles) * c.SPLIT_K *
                                            c.BLOCK_SIZE_M * c.BLOCK_SIZE_N * sizeof(float);
}
}  // namespace

std::size_t gemm_counter_bytes_for_grid(const KernelConfig& c, unsigned grid_x) {
  return counters_for_tiles(c, grid_x);
}

std::size_t gemm_workspace_bytes(const MoeShape& shape, const KernelConfig& c, GemmStage stage,
                                 int64_t M) {
  const int64_t max_padded = M * shape.topk + static_cast<int64_t>(shape.E) * (c.BLOCK_SIZE_M - 1);
  // The slot bound does not depend on the capacity; take the larger of the two for safety.
  const int64_t m_blocks =
      gemm_max_m_blocks(shape, c, M, std::max<int64_t>(max_padded, int64_t{1} << 62));
  return workspace_for_tiles(c, m_blocks * tm::ceil_div(n_out(shape, stage), c.BLOCK_SIZE_N));
}

std::size_t gemm_workspace_bytes_for_grid(const KernelConfig& c, unsigned grid_x) {
  return workspace_for_tiles(c, grid_x);
}

}  // namespace moetune::gemm
