// Host side of the grouped expert GEMM (kernels/moe_gemm_mma.cuh): the kernel spec (template
// arguments, instance name) for a shape and config, the workspace it needs, and its launch.
// Knows the kernel's template parameter list; knows nothing of routing or quantization.
//
// Alignment (SGLang/vLLM moe_align_block_size): sorted_token_ids groups the token slots
// (slot = token * topk + j) by expert, each expert's run padded to a multiple of BLOCK_SIZE_M with
// the sentinel M * topk; expert_ids[b] is the expert of M-block b (-1: not on this rank under EP,
// the block is skipped and its rows are not written); num_tokens_post_padded[0] is the total
// padded length (read on the device: blocks past it exit at once).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include <cuda.h>  // CUstream (types only)

#include "cuda/jit.hpp"
#include "moetune/config.hpp"
#include "moetune/model.hpp"

namespace moetune::gemm {

// up: GEMM1 with w13 (out = [M*topk, 2N]); down: GEMM2 with w2, times the routed weight;
// up_act: GEMM1 with SiLU(gate)·up fused into its epilogue (out = [M*topk, N], the activation
// stage's output: bf16/fp16, or for block fp8 its e4m3 quantization with out_scale; the kernels'
// FUSED_ACT = 1). up and up_act share the grid, the split-K workspace and the config rules; only
// the epilogue and out differ. down_sum: GEMM2 with the top-k sum folded into its epilogue (the
// kernels' SUM_TOPK = 1, sm_90+ only): out is the layer's output [M, K], zeroed beforehand (by
// GEMM1's GemmArgs::zero_out), and each slot's row times its routed weight is added into row
// slot / topk by bf16/fp16 atomics (red.global.add), in whatever order the blocks reach them:
// the result is not bit-reproducible. down and down_sum share the grid, workspace and rules.
enum class GemmStage { up, down, up_act, down_sum };
const char* to_string(GemmStage s);  // "up", "down", "up_act", "down_sum"
bool gemm_stage_is_up(GemmStage s);  // up or up_act (w13, reduction over K)
// Columns of out: 2N (up), N (up_act), K (down, down_sum).
int gemm_out_cols(const MoeShape& shape, GemmStage s);
// How the layer runs GEMM1 for M tokens with the up config `up`: up_act at decode sizes (M*topk
// <= 8 slots per expert of the model) where `up` can fuse: bf16/fp16 unswapped always, swap-AB
// with a gate and an up m64 slice per warpgroup (the only 16-bit swap-AB tiles validate_config
// admits), block fp8 on swap-AB only with BLOCK_SIZE_N / 2
// a multiple of block_k (e.g. n256 for block_k 128: tile_math::gemm_act_violation); up
// otherwise (per-tensor fp8 always). Every config it fuses is one gemm_kernel_spec accepts as
// up_act. At larger M the fused
// epilogue measured slower on the H200 (Qwen3.5 TP4 bf16, same machine, default tiles: layer
// -4.9% at M=1, -2.1% at M=8, -0.5% at M=64 and 256, but +3.7% at M=1024 and +2.9% at M=4096;
// bench/results/2026-11-30_h200_fused_act.md). Block fp8 measurements:
// bench/results/2026-12-01_h200_twelfth_session.md.
constexpr int64_t kFuseActMaxSlotsPerExpert = 8;
GemmStage gemm1_stage(const MoeShape& shape, int64_t M, const KernelConfig& up);
// The sizes where gemm1_stage fuses a config that can: M*topk <= kFuseActMaxSlotsPerExpert *
// max(E_global, E).
bool gemm1_fuse_band(const MoeShape& shape, int64_t M);

// Pointers are device pointers; shapes row-major, the last dim contiguous. Element types:
// bf16 shapes use __nv_bfloat16 for a and out, fp16 __half, fp8_w8a8 e4m3 for a and w with bf16
// out. Every pointer the stage does not use may be null.
struct GemmArgs {
  GemmStage stage = GemmStage::up;
  // up: hidden [M, K] (bf16/fp16, or fp8 e4m3 after quantization); row = token = slot / topk.
  // down: intermediate [M*topk, N] (bf16/fp16 or fp8); row = slot.
  const void* a = nullptr;
  // fp8 block-wise: up [M, K/block_k], down [M*topk, N/block_k]; fp8 per-tensor: [1];
  // bf16/fp16: nullptr. fp32.
  const float* a_scale = nullptr;
  // up: w13 [E, 2N, K]; down: w2 [E, K, N] (the reduction dim contiguous).
  const void* w = nullptr;
  // fp8 block-wise: up w13_scale [E, 2N/block_n, K/block_k], down w2_scale [E, K/block_n,
  // N/block_k]; fp8 per-tensor: [E]; bf16/fp16: nullptr. fp32.
  const float* w_scale = nullptr;
  // up: [M*topk, 2N]; up_act: [M*topk, N] = silu(gate)·up; down: [M*topk, K], each slot's row
  // times topk_weights[slot]; down_sum: [M, K], those rows added into row slot / topk (must be
  // zero before: zero_out). bf16 (fp16 for fp16; up_act with block fp8: e4m3, see out_scale).
  // Only rows of valid slots (< M*topk) on experts of this rank are written (added).
  void* out = nullptr;
  // up_act with block fp8 only: [M*topk, N/block_k] fp32, the per-token group scales of out
  // (e4m3 [M*topk, N] there): GEMM2's a_scale.
  float* out_scale = nullptr;
  const float* topk_weights = nullptr;  // [M, topk] fp32; read by down and down_sum only
  // Null, or zero_out_bytes (a multiple of 16, 16-byte aligned) that this launch zeroes, each
  // block a share after its PDL wait: GEMM1 clears the layer's output for a down_sum GEMM2 (the
  // GEMM2 of the same call; any stage kernel in between leaves it alone).
  void* zero_out = nullptr;
  std::size_t zero_out_bytes = 0;
  const int32_t* sorted_token_ids = nullptr;        // [max_num_tokens_padded]
  const int32_t* expert_ids = nullptr;              // [max_num_tokens_padded / BLOCK_SIZE_M]
  const int32_t* num_tokens_post_padded = nullptr;  // [1]
  int64_t M = 0;  // tokens in the batch
  // Capacity of sorted_token_ids (bounds the grid together with M, topk and E).
  int64_t max_num_tokens_padded = 0;
  // SPLIT_K > 1: per-tile arrival counters, then fp32 partial tiles; gemm_workspace_bytes() long.
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  // false (default): launch_gemm zeroes the counters (a small memset on `stream`) before each
  // split-K launch, so the workspace may hold anything. true: the caller promises the counters
  // are zero (a workspace zeroed once and used by this GEMM alone: every launch leaves them zero
  // again), which saves the memset (~1-2 µs at decode sizes).
  bool workspace_counters_zeroed = false;
  // A programmatic dependent launch (cuda::LaunchOptions::pdl; sm_90+ only: the caller decides):
  // the GEMM's blocks may be scheduled while the previous kernel finishes; both kernels
  // pdl_wait() before their first global access. Not where launch_gemm memsets the split-K
  // counters first: a memset between two kernels leaves no programmatic edge to take.
  bool pdl = false;
  // Non-null (up stages; gemm_inline_align_violation must hold nothing): no alignment ran
  // before this GEMM. Each block derives its expert and slots from topk_ids [M, topk] (global
  // expert ids; this rank's experts start at expert_start), and the launch writes the tables
  // (sorted_token_ids, expert_ids, num_tokens_post_padded, the layout moe_align writes, each
  // expert's slots in ascending order) for the GEMM2 after it.
  const int32_t* topk_ids = nullptr;
  int expert_start = 0;
};

// Why GEMM1 cannot derive the alignment itself (GemmArgs::topk_ids) for M tokens with `config`
// on `arch`, or nullptr when it can: the up stages of the Hopper kernel (gemm_uses_wgmma)
// without split-K, M * topk <= tile_math::kInlineAlignMaxSlots and at most
// tile_math::kInlineAlignMaxE local experts.
const char* gemm_inline_align_violation(const MoeShape& shape, const KernelConfig& config,
                                        GemmStage stage, int64_t M, const std::string& arch);

// The kernel instance for (shape, config, stage) on `arch` ("sm_80", "sm_89", "sm_90a",
// "sm_120"...). Name carries the path and config:
// moe_gemm_up_fp8b_m16n64k128_g1_w4_s4_sk1_N256_K3072_topk8_b128x128,
// moe_gemm_down_bf16_wgmma_m128n128k64_g16_w8_s4_sk1_N256_K3072_topk8 (sm_90a, wgmma tiles),
// moe_gemm_up_act_bf16_m16n64k128_g1_w4_s3_sk1_N256_K3072_topk8 (fused SiLU·up, FUSED_ACT=1).
// Throws InputError(key, value, reason) for a config the kernel cannot run on this shape
// (tile_rule_violation, block-fp8 scale straddling, fp8 below sm_89, up_act with per-tensor fp8,
// with a warp slice whose halves are not whole n8 chunks, or with block fp8 off swap-AB or with
// part of a quantization group per block: tile_math::gemm_act_violation).
// inline_align: the instance that derives the alignment (GemmArgs::topk_ids; the wgmma
// kernel's ALIGN_E = shape.E, name suffix _ia); InputError where gemm_inline_align_violation
// at M = 1 says it cannot.
cuda::KernelSpec gemm_kernel_spec(const MoeShape& shape, const KernelConfig& config,
                                  GemmStage stage, const std::string& arch,
                                  bool inline_align = false);

// True when gemm_kernel_spec picks the Hopper kernel (kernels/moe_gemm_wgmma_sm90a.cuh): arch
// sm_90a and tile_math::gemm_wgmma_eligible (rows of 128 bytes, warpgroup tiling), or SWAP_AB 1
// (sm_90a only; gemm_kernel_spec throws InputError for a tile swap-AB cannot run). Otherwise the
// mma.sync kernel (kernels/moe_gemm_mma.cuh) runs. Same contract, results and smem formula.
bool gemm_uses_wgmma(const MoeShape& shape, const KernelConfig& config, const std::string& arch);

// The upper bound on M-blocks that can be active for M tokens (host-side, no sync):
// min(floor(max_num_tokens_padded / BM), ceil(M*topk / BM) + min(E, M*topk)). Whole blocks of
// the capacity only: the kernels read expert_ids[b] and sorted_token_ids[b*BM, (b+1)*BM) of every
// block b of the grid before num_tokens_post_padded says whether b has work.
int64_t gemm_max_m_blocks(const MoeShape& shape, const KernelConfig& config, int64_t M,
                          int64_t max_num_tokens_padded);

// Workspace bytes for M tokens (0 when SPLIT_K == 1). Computed with the largest
// max_num_tokens_padded the alignment can produce (M*topk + E*(BLOCK_SIZE_M-1)).
std::size_t gemm_workspace_bytes(const MoeShape& shape, const KernelConfig& config,
                                 GemmStage stage, int64_t M);

// Workspace bytes one launch with grid.x = grid_x needs (what launch_gemm checks), and the bytes
// of its leading counter region (int32 per tile, padded to 256 bytes; 0 when SPLIT_K == 1).
std::size_t gemm_workspace_bytes_for_grid(const KernelConfig& config, unsigned grid_x);
std::size_t gemm_counter_bytes_for_grid(const KernelConfig& config, unsigned grid_x);

// Launch geometry of one call on `arch` (grid.x: M-blocks x N-tiles in GROUP_SIZE_M order;
// grid.y: SPLIT_K; block: 32 * num_warps threads, plus the producer warpgroup where the wgmma
// kernel is warp-specialized: block fp8 with >= 8 K-tiles per split,
// tile_math::gemm_wgmma_warp_specialized).
struct GemmLaunch {
  cuda::Dim3 grid;
  cuda::Dim3 block;
  std::size_t smem_bytes = 0;
};
GemmLaunch gemm_launch_geometry(const MoeShape& shape, const KernelConfig& config,
                                GemmStage stage, int64_t M, int64_t max_num_tokens_padded,
                                const std::string& arch);

// Enqueues one GEMM on `stream` (JIT-compiles and loads the instance for the current device on
// first use), preceded by a memset of the split-K counters unless workspace_counters_zeroed;
// with args.pdl (and no memset) as a programmatic dependent launch.
// Never synchronizes, never allocates. Throws InputError for a bad config or
// arguments (a missing pointer, a too-small workspace), CudaError for a failed launch.
void launch_gemm(const MoeShape& shape, const KernelConfig& config, const GemmArgs& args,
                 CUstream stream);

}  // namespace moetune::gemm
