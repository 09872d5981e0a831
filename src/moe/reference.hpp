// The fp64 CPU reference of every stage of the MoE layer and of the whole layer, on dequantized
// weights; plus the host-side number formats (bf16, fp16, fp8 e4m3) the checks need. No CUDA.
//
// Layouts (row-major, the same as the kernels'; "slot" = token * topk + j):
//   router_logits [M, E_global] fp32; correction_bias [E_global] fp32
//   topk_ids [M, topk] int32 (global expert numbering), topk_weights [M, topk]
//   sorted_token_ids / expert_ids / num_tokens_post_padded: see align_reference
//   hidden [M, K]; w13 [E, 2N, K] (rows 0..N-1 gate, N..2N-1 up); w2 [E, K, N]
//   block fp8: w13_scale [E, 2N/block_n, K/block_k], w2_scale [E, K/block_n, N/block_k] fp32,
//              activations quantized per token per block_k group (a_scale [rows, cols/block_k])
//   per-tensor fp8: w13_scale [E], w2_scale [E] fp32; activations one dynamic scale per tensor
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "moetune/model.hpp"

namespace moetune::moe {

// ---- host number formats -----------------------------------------------------------------------
float bf16_to_float(std::uint16_t bits);
std::uint16_t float_to_bf16(float x);  // round to nearest even
float fp16_to_float(std::uint16_t bits);
std::uint16_t float_to_fp16(float x);  // round to nearest even, overflow to inf
// fp8 e4m3 ("fn": no inf, max 448, NaN = 0x7f/0xff).
inline constexpr double kFp8Max = 448.0;
double e4m3_to_double(std::uint8_t bits);
std::uint8_t double_to_e4m3(double x);  // round to nearest even, saturating to +-448
double round_e4m3(double x);            // the e4m3 value nearest to x (saturating)
// The 16-bit activation/weight element of a 16-bit dtype (bf16 bits or fp16 bits) as a double.
double half_bits_to_double(Dtype dtype, std::uint16_t bits);
std::uint16_t double_to_half_bits(Dtype dtype, double x);

// ---- routing -----------------------------------------------------------------------------------
// scores s = softmax(logits) or sigmoid(logits); choice c = s + correction_bias (when given);
// with n_group > 1, a group's score is the sum of its top-2 choices (with a bias; DeepSeek
// noaux_tc) or its largest choice (without), and only the best topk_group groups stay eligible;
// the topk largest eligible choices are selected (a tie goes to the smaller expert id), in
// descending order; weights = s of the selected, divided by their sum when renormalize, times
// routed_scaling_factor.
struct RoutingResult {
  std::vector<std::int32_t> topk_ids;  // [M, topk]
  std::vector<double> topk_weights;    // [M, topk]
  std::vector<double> choice;          // [M, E_global]: c after group masking (-inf if masked)
  std::vector<double> choice_unmasked; // [M, E_global]: c before it
  std::vector<double> group_score;     // [M, n_group] (n_group > 1; else empty)
};
RoutingResult route_reference(const float* router_logits, int M, int E_global, int topk,
                              const Routing& routing, const float* correction_bias);
// Whether a kernel's top-k `ids` of token t (any order) may differ from the reference's only
// through near-ties that fp32 against fp64 can flip (relative tolerance rel_tol): every pick's
// choice within rel_tol of the reference's k-th choice; or, with groups, every pick in a group
// whose score is within rel_tol of the topk_group-th best group score (or above it), at most
// topk_group groups, and the picks the top-k of the unmasked choices over their own groups
// (the selection the reference would make had the near-tied groups gone the other way). `ids`:
// topk distinct ids in [0, E_global) (the caller checks).
bool routing_near_tie(const RoutingResult& ref, std::int64_t t, const std::int32_t* ids,
                      int E_global, int topk, const Routing& routing, double rel_tol);
// Weights for a given selection (ids of one token) under the same rules: to compare a kernel's
// weights when its selection differs from the reference's only at a near-tie.
std::vector<double> routing_weights_for(const float* logits_row, int E_global,
                                        const std::int32_t* ids, int topk,
                                        const Routing& routing);

// ---- alignment ---------------------------------------------------------------------------------
// This rank holds experts [rank*E, (rank+1)*E) of the global numbering. Slots whose expert is on
// another rank are not emitted. For each local expert e in order, its slots (ascending here; in
// any order from the kernel) fill ceil(count_e / BLOCK_SIZE_M) blocks; the rest of each block is
// padding holding the sentinel M*topk. expert_ids[b] = local expert of block b, -1 past the end.
struct Alignment {
  std::vector<std::int32_t> sorted_token_ids;  // [max_num_tokens_padded]
  std::vector<std::int32_t> expert_ids;        // [max_num_m_blocks]
  std::int32_t num_tokens_post_padded = 0;
};
// Bounds the buffers are sized for: M*topk + min(E, M*topk) * (BLOCK_SIZE_M - 1), rounded up to
// BLOCK_SIZE_M (at most min(E, slots) experts are non-empty, each pads fewer than BLOCK_SIZE_M).
std::int64_t max_num_tokens_padded(std::int64_t M, int topk, int E, int BLOCK_SIZE_M);
std::int64_t max_num_m_blocks(std::int64_t M, int topk, int E, int BLOCK_SIZE_M);
Alignment align_reference(const std::int32_t* topk_ids, std::int64_t M, int topk, int E, int rank,
                          int BLOCK_SIZE_M);
// Checks a kernel's alignment against the reference: the same num_tokens_post_padded and
// expert_ids, the same set of slots in every block range of an expert, sentinels elsewhere.
// Returns "" when it matches, else what differs first.
std::string compare_alignment(const Alignment& got, const Alignment& ref, std::int64_t M,
                              int topk);

// ---- fp8 activation quantization ----------------------------------------------------------------
// x / scale as the kernels compute it: both operands in fp32, one correctly rounded fp32 division
// (bf16 inputs over a scale of amax/448 land near e4m3 ties often; double division would decide
// ~0.1% of them differently).
double fp32_quotient(double x, double scale);
// Per row per `group` columns: scale = max(|x|, 1e-10) / 448 over the group; q = e4m3(x / scale).
// Writes the dequantized q * scale into `deq` (rows*cols) and the scales (rows*(cols/group)).
void quant_fp8_group_reference(const double* x, std::int64_t rows, int cols, int group,
                               double* deq, double* scale);
// One dynamic scale for the tensor: scale = max(max|x|, 1e-10) / 448; returns it.
double quant_fp8_tensor_reference(const double* x, std::int64_t n, double* deq);

// ---- activation and sum ------------------------------------------------------------------------
double silu(double x);
// out[r, n] = silu(h[r, n]) * h[r, N + n] for h [rows, 2N].
void silu_mul_reference(const double* h, std::int64_t rows, int N, double* out);

// ---- weights on the host, in storage format --------------------------------------------------
// w13/w2 hold bf16 or fp16 bits (uint16) or e4m3 bytes (uint8); scales as in the header comment.
struct HostWeights {
  Dtype dtype = Dtype::bf16;
  std::optional<std::array<int, 2>> block_shape;
  const void* w13 = nullptr;
  const void* w2 = nullptr;
  const float* w13_scale = nullptr;
  const float* w2_scale = nullptr;
};
// Dequantized rows: dst[K] = w13[e, n, :], dst[N] = w2[e, k, :].
void w13_row(const MoeShape& shape, const HostWeights& w, int e, int n, double* dst);
void w2_row(const MoeShape& shape, const HostWeights& w, int e, int k, double* dst);
// Dequantized element w13[e, n, k] / w2[e, k, n].
double w13_at(const MoeShape& shape, const HostWeights& w, int e, int n, int k);
double w2_at(const MoeShape& shape, const HostWeights& w, int e, int k, int n);

// ---- the whole layer ---------------------------------------------------------------------------
// out[t, :] = sum over j with topk_ids[t, j] on this rank of
//   topk_weights[t, j] * w2[e] . act(silu(gate) * up), gate/up = w13[e] . x[t]
// where for fp8 the activations x and act are quantized as the kernels do, from the same 16-bit
// values (GEMM1's output and SiLU·up are rounded to the activation dtype first) (block: per token per
// block_k group; per-tensor: one dynamic scale over all M rows of hidden, and one over all
// emitted slots of act — which needs every token's activation, so with a row sample the
// per-tensor act scale is taken from `act_scale_override` when given).
// hidden holds 16-bit bits of the activation dtype (bf16 for bf16 and fp8, fp16 for fp16).
// Computes the rows listed in `rows` (token indices); returns [rows.size(), K]. Multi-threaded.
struct LayerReferenceOptions {
  int rank = 0;
  int threads = 0;                           // 0 = hardware concurrency
  std::optional<double> act_scale_override;  // per-tensor fp8: the intermediate's scale
};
std::vector<double> layer_reference(const MoeShape& shape, const HostWeights& w, std::int64_t M,
                                    const std::uint16_t* hidden, const std::int32_t* topk_ids,
                                    const float* topk_weights, const std::vector<std::int64_t>& rows,
                                    const LayerReferenceOptions& opts = {});
// Activation dtype of a weight dtype: fp16 for fp16, else bf16.
Dtype activation_dtype(Dtype weight_dtype);

// All token indices when M <= max_rows, else a sorted random sample of max_rows distinct tokens.
std::vector<std::int64_t> sample_rows(std::int64_t M, std::int64_t max_rows, std::uint64_t seed);
// ||got - ref|| / ||ref|| (Frobenius); NaN if any element of got is NaN or inf.
double rel_error(const std::vector<double>& got, const std::vector<double>& ref);

}  // namespace moetune::moe
