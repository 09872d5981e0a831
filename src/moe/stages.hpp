// Host side of the stage kernels around the grouped GEMM (kernels/routing.cuh, moe_align.cuh,
// quant_fp8_amax.cuh, quant_fp8_group.cuh, silu_mul.cuh, topk_reduce.cuh): their KernelSpecs
// (the only place that knows their template parameter lists) and their launches. No sync, no
// allocation: every launch takes device pointers and a stream.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include <cuda.h>

#include "cuda/jit.hpp"
#include "moetune/model.hpp"

namespace moetune::moe {

// Limits of the stage kernels.
inline constexpr int kMaxLocalExperts = 512;     // moe_align's shared tables (E per rank)
inline constexpr int kMaxGlobalExperts = 1024;   // routing's router width
inline constexpr int kAmaxPartials = 256;        // per-tensor fp8: blocks of the amax pass
inline constexpr int kAlignSmallThreads = 256;   // moe_align's block for <= 4096 slots
inline constexpr int kAlignLargeThreads = 1024;  // and above
inline constexpr std::int64_t kAlignSmallSlots = 4096;
// moe_route_align (routing + alignment in one block) at decode sizes: up to kRouteAlignMaxTokens
// tokens (one per warp of its 256 threads) and kRouteAlignMaxSlots slots (its shared id table).
// Measured on an H200 (bench/results/2026-11-30_h200_route_align2.md): the layer gains 0.3-0.6
// us at M = 1..4 on all three anchor shapes, and at 4 tokens per warp (M = 32) the serial
// routing cost far more than the launch it saves (+8..+19 us, 2026-11-30_h200_branches.md).
// Up to 8 tokens against 4 (2026-12-01_h200_fifteenth_session.md, call 1, two interleaved runs,
// layer): M = 5 -2.8% / -0.9% / -0.4% (DeepSeek-V3 fp8, Qwen3.5 fp8, Qwen3.5 bf16), M = 6
// +0.3..+0.5%, M = 7 -0.3..+4.8%, M = 8 -0.2..+2.6%: fused up to M = 5.
inline constexpr int kRouteAlignThreads = 256;
inline constexpr std::int64_t kRouteAlignMaxTokens = 5;
inline constexpr int kRouteAlignMaxSlots = 512;

// Activation element code of kernels/common/tile_math.cuh (kDtypeBf16 / kDtypeFp16).
int activation_code(Dtype weight_dtype);

// with_quant (block fp8 only, else InputError): the routing launch also quantizes the hidden
// states in its spare blocks (RoutingQuant below; the quant stage then launches nothing).
cuda::KernelSpec routing_spec(const MoeShape& shape, const std::string& arch,
                              bool with_quant = false);
cuda::KernelSpec align_spec(int BLOCK_SIZE_M, int threads, const std::string& arch);
cuda::KernelSpec route_align_spec(const MoeShape& shape, int BLOCK_SIZE_M, const std::string& arch,
                                  bool with_quant = false);
// Whether M tokens fit moe_route_align (one block routes and aligns them).
bool route_align_fits(const MoeShape& shape, std::int64_t M);
cuda::KernelSpec amax_spec(Dtype weight_dtype, const std::string& arch);
// group: block_k for block-wise fp8 (per token per group), 0 for per tensor.
cuda::KernelSpec quant_spec(Dtype weight_dtype, int group, const std::string& arch);
cuda::KernelSpec silu_mul_spec(const MoeShape& shape, const std::string& arch);
// Block fp8 only (block_k divides N, check_stage_shape): SiLU(gate)·up and its per-token
// block_k-column quantization in one kernel (silu_mul_quant.cuh).
cuda::KernelSpec silu_mul_quant_spec(const MoeShape& shape, const std::string& arch);
cuda::KernelSpec topk_reduce_spec(const MoeShape& shape, const std::string& arch);

// Throws InputError for shapes the stage kernels cannot run (E > 512 per rank, E_global > 1024,
// N or K not a multiple of 8, bad groups, fp8 group not dividing N and K).
void check_stage_shape(const MoeShape& shape, int rank);
// The block_k values the block-fp8 kernels take: 64, 128 or a multiple of 256.
bool block_k_runs(int block_k);

// --- launches (Jit::get loads on first use; the FusedMoe prepares them up front) --------------
// pdl: a programmatic dependent launch (cuda::LaunchOptions; sm_90+ only: the caller decides).
// Every stage kernel pdl_wait()s before its first global access, so either way is correct.
// Block fp8's hidden-state quantization carried by a routing launch: x [M, K] act into q
// [M, K] e4m3 and scale [M, K / block_k] fp32, the same bits as launch_quant.
struct RoutingQuant {
  const void* x = nullptr;
  std::uint8_t* q = nullptr;
  float* scale = nullptr;
};
// zero / zero_n: int32 the launch also sets to 0 (block 0), for a later kernel that needs them
// zero where no alignment launch runs (the sliced GEMM kernel's counters). zero_bytes bytes at
// zero_out (16-byte aligned, a multiple of 16; every block takes a share): the output the
// sliced GEMM kernel adds into, so that it needs no counters. InputError on a bad range.
void launch_routing(const MoeShape& shape, const std::string& arch, const float* router_logits,
                    const float* correction_bias, std::int32_t* topk_ids, float* topk_weights,
                    std::int64_t M, CUstream stream, bool pdl = false,
                    const RoutingQuant* quant = nullptr, std::int32_t* zero = nullptr,
                    int zero_n = 0, void* zero_out = nullptr, std::size_t zero_bytes = 0);
// Alignment outputs sized by max_num_tokens_padded / max_num_m_blocks (reference.hpp).
void launch_align(int BLOCK_SIZE_M, const std::string& arch, const std::int32_t* topk_ids,
                  std::int64_t M, int topk, int E, int rank, std::int32_t* sorted_token_ids,
                  std::int32_t* expert_ids, std::int32_t* num_tokens_post_padded,
                  std::int64_t max_num_tokens_padded, std::int64_t max_num_m_blocks,
                  CUstream stream, bool pdl = false, std::int32_t* zero_a = nullptr,
                  int zero_a_n = 0, std::int32_t* zero_b = nullptr, int zero_b_n = 0);
// (zero_a/zero_b: int32 ranges the alignment also sets to 0, e.g. the GEMMs' split-K counters.)
// Routing and alignment in one launch (route_align_fits(shape, M) must hold): the outputs of
// launch_routing and then launch_align.
void launch_route_align(const MoeShape& shape, int BLOCK_SIZE_M, const std::string& arch,
                        const float* router_logits, const float* correction_bias,
                        std::int32_t* topk_ids, float* topk_weights, std::int64_t M, int rank,
                        std::int32_t* sorted_token_ids, std::int32_t* expert_ids,
                        std::int32_t* num_tokens_post_padded, std::int64_t max_num_tokens_padded,
                        std::int64_t max_num_m_blocks, CUstream stream, bool pdl = false,
                        std::int32_t* zero_a = nullptr, int zero_a_n = 0,
                        std::int32_t* zero_b = nullptr, int zero_b_n = 0,
                        const RoutingQuant* quant = nullptr);
// fp8 quantization of x [rows, cols] (activation dtype) into q (e4m3) and scale: block-wise
// (group = block_k, scale [rows, cols/group]) or per tensor (group 0, scale [1]; uses
// `partials` [kAmaxPartials] fp32 as scratch).
void launch_quant(Dtype weight_dtype, int group, const std::string& arch, const void* x,
                  std::int64_t rows, int cols, std::uint8_t* q, float* scale, float* partials,
                  CUstream stream, bool pdl = false);
void launch_silu_mul(const MoeShape& shape, const std::string& arch, const void* h, void* out,
                     const std::int32_t* topk_ids, std::int64_t M, int rank, CUstream stream,
                     bool pdl = false);
// Block fp8: h [M*topk, 2N] -> q [M*topk, N] e4m3 and scale [M*topk, N/block_k] fp32, the same
// bits as launch_silu_mul followed by launch_quant (no 16-bit activation in memory).
void launch_silu_mul_quant(const MoeShape& shape, const std::string& arch, const void* h,
                           std::uint8_t* q, float* scale, const std::int32_t* topk_ids,
                           std::int64_t M, int rank, CUstream stream, bool pdl = false);
void launch_topk_reduce(const MoeShape& shape, const std::string& arch, const void* y, void* out,
                        const std::int32_t* topk_ids, std::int64_t M, int rank, CUstream stream,
                        bool pdl = false);

}  // namespace moetune::moe
