// Kernel specs and launches of the stage kernels: see stages.hpp.
#include "moe/stages.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "kernels/common/tile_math.cuh"
#include "moetune/error.hpp"

namespace moetune::moe {
namespace {

constexpr int kRoutingWarps = 4;      // tokens per routing block
constexpr int kElementwiseThreads = 256;
constexpr std::int64_t kMaxGrid = 132 * 16;  // grid-stride kernels: enough blocks to fill a GPU

std::string b(bool v) { return v ? "true" : "false"; }

cuda::KernelSpec make_spec(const char* file, const char* kernel, const std::string& arch) {
  cuda::KernelSpec s;
  s.file = file;
  s.kernel = kernel;
  s.arch = arch;
  return s;
}

void arg(cuda::KernelSpec& s, const char* name, const std::string& v) {
  s.template_args.emplace_back(name, v);
}
void arg(cuda::KernelSpec& s, const char* name, long long v) { arg(s, name, std::to_string(v)); }

const char* act_tag(Dtype d) { return d == Dtype::fp16 ? "fp16" : "bf16"; }

unsigned grid_for(std::int64_t work_items, int per_block) {
  const std::int64_t g = (work_items + per_block - 1) / per_block;
  return static_cast<unsigned>(std::clamp<std::int64_t>(g, 1, kMaxGrid));
}

void launch(const cuda::KernelSpec& spec, cuda::Dim3 grid, unsigned threads, CUstream stream,
            void** args, bool pdl) {
  cuda::LaunchOptions lo;
  lo.pdl = pdl;
  cuda::Jit::instance().get(spec)->launch(grid, cuda::Dim3{threads, 1, 1}, 0, stream, args, lo);
}

}  // namespace

int activation_code(Dtype weight_dtype) {
  return weight_dtype == Dtype::fp16 ? tile_math::kDtypeFp16 : tile_math::kDtypeBf16;
}

bool block_k_runs(int bk) { return bk == 64 || bk == 128 || (bk > 0 && bk % 256 == 0); }

void check_stage_shape(const MoeShape& shape, int rank) {
  if (shape.E < 1 || shape.E > kMaxLocalExperts)
    throw InputError("E", std::to_string(shape.E), "experts per rank must be in [1, 512]");
  if (shape.E_global < shape.E || shape.E_global > kMaxGlobalExperts)
    throw InputError("E_global", std::to_string(shape.E_global), "must be in [E, 1024]");
  if (shape.topk < 1 || shape.topk > shape.E_global)
    throw InputError("topk", std::to_string(shape.topk), "must be in [1, E_global]");
  if (shape.N % 8 != 0) throw InputError("N", std::to_string(shape.N), "must be a multiple of 8");
  if (shape.K % 8 != 0) throw InputError("K", std::to_string(shape.K), "must be a multiple of 8");
  const int ranks = shape.E_global / std::max(shape.E, 1);
  if (rank < 0 || rank >= std::max(ranks, 1))
    throw InputError("rank", std::to_string(rank),
                     fmt::format("must be in [0, {}) (E_global / E)", std::max(ranks, 1)));
  const Routing& r = shape.routing;
  if (r.n_group > 1) {
    if (r.n_group > 32 || shape.E_global % r.n_group != 0)
      throw InputError("n_group", std::to_string(r.n_group),
                       "must divide the expert count and be <= 32");
    if (r.topk_group < 1 || r.topk_group > r.n_group ||
        r.topk_group * (shape.E_global / r.n_group) < shape.topk)
      throw InputError("topk_group", std::to_string(r.topk_group),
                       "must be in [1, n_group] and hold at least topk experts");
  }
  if (shape.dtype == Dtype::fp8_w8a8 && shape.block_shape) {
    const int bk = (*shape.block_shape)[1];
    if (!block_k_runs(bk))
      throw InputError("block_shape", std::to_string(bk), "block_k must be 64, 128 or k*256");
    if (shape.K % bk != 0 || shape.N % bk != 0)
      throw InputError("block_shape", std::to_string(bk), "block_k must divide N and K");
  }
}

// The block-wise group of a routing launch's hidden-state quantization: block_k, or 0 (none).
static int routing_quant_group(const MoeShape& shape, bool with_quant) {
  if (!with_quant) return 0;
  if (shape.dtype != Dtype::fp8_w8a8 || !shape.block_shape)
    throw InputError("dtype", std::string(to_string(shape.dtype)),
                     "the routing quantizes the hidden states for block-wise fp8 only");
  return (*shape.block_shape)[1];
}

cuda::KernelSpec routing_spec(const MoeShape& shape, const std::string& arch, bool with_quant) {
  const int quant_group = routing_quant_group(shape, with_quant);
  const Routing& r = shape.routing;
  const bool sigmoid = r.scoring == "sigmoid";
  const int groups = std::max(r.n_group, 1);
  auto s = make_spec("routing.cuh", "moetune::moe_routing", arch);
  arg(s, "E_GLOBAL", shape.E_global);
  arg(s, "TOPK", shape.topk);
  arg(s, "SCORING", sigmoid ? 1 : 0);
  arg(s, "N_GROUP", groups);
  arg(s, "TOPK_GROUP", groups > 1 ? r.topk_group : 1);
  arg(s, "HAS_BIAS", b(r.correction_bias));
  arg(s, "RENORMALIZE", b(r.renormalize));
  arg(s, "WARPS", kRoutingWarps);
  arg(s, "ACT", quant_group > 0 ? activation_code(shape.dtype) : 0);
  arg(s, "QUANT_GROUP", quant_group);
  s.name = fmt::format("moe_routing_{}_e{}_top{}_g{}of{}{}{}{}", sigmoid ? "sigmoid" : "softmax",
                       shape.E_global, shape.topk, groups > 1 ? r.topk_group : 1, groups,
                       r.correction_bias ? "_bias" : "", r.renormalize ? "_renorm" : "",
                       quant_group > 0 ? fmt::format("_q{}", quant_group) : "");
  return s;
}

cuda::KernelSpec align_spec(int BLOCK_SIZE_M, int threads, const std::string& arch) {
  auto s = make_spec("moe_align.cuh", "moetune::moe_align", arch);
  arg(s, "BLOCK_SIZE_M", BLOCK_SIZE_M);
  arg(s, "THREADS", threads);
  arg(s, "MAX_E", kMaxLocalExperts);
  s.name = fmt::format("moe_align_m{}_t{}", BLOCK_SIZE_M, threads);
  return s;
}

cuda::KernelSpec route_align_spec(const MoeShape& shape, int BLOCK_SIZE_M, const std::string& arch,
                                  bool with_quant) {
  // The routing's template arguments, in order, then the alignment's, then the quantization's.
  cuda::KernelSpec r = routing_spec(shape, arch, with_quant);
  auto s = make_spec("moe_route_align.cuh", "moetune::moe_route_align", arch);
  std::vector<std::pair<std::string, std::string>> quant_args;
  for (const auto& a : r.template_args) {
    if (a.first == "ACT" || a.first == "QUANT_GROUP")
      quant_args.push_back(a);
    else if (a.first != "WARPS")
      s.template_args.push_back(a);
  }
  arg(s, "BLOCK_SIZE_M", BLOCK_SIZE_M);
  arg(s, "THREADS", kRouteAlignThreads);
  arg(s, "MAX_E", kMaxLocalExperts);
  arg(s, "MAX_SLOTS", kRouteAlignMaxSlots);
  for (const auto& a : quant_args) s.template_args.push_back(a);
  s.name = fmt::format("moe_route_align_{}_m{}", r.name.substr(std::string("moe_routing_").size()),
                       BLOCK_SIZE_M);
  return s;
}

bool route_align_fits(const MoeShape& shape, std::int64_t M) {
  return M >= 1 && M <= kRouteAlignMaxTokens && M * shape.topk <= kRouteAlignMaxSlots;
}

cuda::KernelSpec amax_spec(Dtype weight_dtype, const std::string& arch) {
  auto s = make_spec("quant_fp8_amax.cuh", "moetune::quant_fp8_amax", arch);
  arg(s, "ACT", activation_code(weight_dtype));
  arg(s, "THREADS", kElementwiseThreads);
  s.name = fmt::format("quant_fp8_amax_{}", act_tag(weight_dtype));
  return s;
}

cuda::KernelSpec quant_spec(Dtype weight_dtype, int group, const std::string& arch) {
  auto s = make_spec("quant_fp8_group.cuh", "moetune::quant_fp8_group", arch);
  arg(s, "ACT", activation_code(weight_dtype));
  arg(s, "GROUP", group);
  arg(s, "THREADS", kElementwiseThreads);
  s.name = group > 0 ? fmt::format("quant_fp8_group{}_{}", group, act_tag(weight_dtype))
                     : fmt::format("quant_fp8_tensor_{}", act_tag(weight_dtype));
  return s;
}

cuda::KernelSpec silu_mul_spec(const MoeShape& shape, const std::string& arch) {
  auto s = make_spec("silu_mul.cuh", "moetune::silu_mul", arch);
  arg(s, "ACT", activation_code(shape.dtype));
  arg(s, "N", shape.N);
  arg(s, "THREADS", kElementwiseThreads);
  s.name = fmt::format("silu_mul_{}_n{}", act_tag(shape.dtype), shape.N);
  return s;
}

cuda::KernelSpec silu_mul_quant_spec(const MoeShape& shape, const std::string& arch) {
  if (shape.dtype != Dtype::fp8_w8a8 || !shape.block_shape)
    throw InputError("dtype", std::string(to_string(shape.dtype)),
                     "the fused activation quantization is for block-wise fp8 only");
  const int group = (*shape.block_shape)[1];
  auto s = make_spec("silu_mul_quant.cuh", "moetune::silu_mul_quant_group", arch);
  arg(s, "ACT", activation_code(shape.dtype));
  arg(s, "N", shape.N);
  arg(s, "GROUP", group);
  arg(s, "THREADS", kElementwiseThreads);
  s.name = fmt::format("silu_mul_quant_group{}_{}_n{}", group, act_tag(shape.dtype), shape.N);
  return s;
}

cuda::KernelSpec topk_reduce_spec(const MoeShape& shape, const std::string& arch) {
  auto s = make_spec("topk_reduce.cuh", "moetune::topk_reduce", arch);
  arg(s, "ACT", activation_code(shape.dtype));
  arg(s, "K", shape.K);
  arg(s, "TOPK", shape.topk);
  arg(s, "THREADS", kElementwiseThreads);
  s.name = fmt::format("topk_reduce_{}_k{}_top{}", act_tag(shape.dtype), shape.K, shape.topk);
  return s;
}

// Blocks of `warps_per_block` warps that quantize M rows of the hidden states (one warp per
// (row, group), as launch_quant gives the quant kernel), or 0 without a quantization.
static std::int64_t routing_quant_blocks(const MoeShape& shape, std::int64_t M, int warps_per_block,
                                  const RoutingQuant* quant) {
  if (quant == nullptr) return 0;
  const int group = routing_quant_group(shape, true);
  const std::int64_t warps = M * (shape.K / group);
  return std::clamp<std::int64_t>((warps + warps_per_block - 1) / warps_per_block, 1, kMaxGrid);
}

void launch_routing(const MoeShape& shape, const std::string& arch, const float* router_logits,
                    const float* correction_bias, std::int32_t* topk_ids, float* topk_weights,
                    std::int64_t M, CUstream stream, bool pdl, const RoutingQuant* quant,
                    std::int32_t* zero, int zero_n, void* zero_out, std::size_t zero_bytes) {
  if (M <= 0) return;
  if (shape.routing.correction_bias && correction_bias == nullptr)
    throw InputError("correction_bias", "null", "the routing needs a correction bias");
  if (zero_n < 0 || (zero_n > 0 && zero == nullptr))
    throw InputError("zero_n", std::to_string(zero_n), "needs a non-null range of that many int32");
  if (zero_bytes % 16 != 0)
    throw InputError("zero_bytes", std::to_string(zero_bytes), "must be a multiple of 16");
  if (zero_bytes > 0 && (zero_out == nullptr || reinterpret_cast<std::uintptr_t>(zero_out) % 16))
    throw InputError("zero_out", fmt::format("{}", zero_out),
                     "must be a non-null, 16-byte aligned pointer (16-byte stores)");
  long long m = M;
  float rsf = static_cast<float>(shape.routing.routed_scaling_factor);
  const void* x = quant ? quant->x : nullptr;
  std::uint8_t* q = quant ? quant->q : nullptr;
  float* qs = quant ? quant->scale : nullptr;
  int cols = shape.K;
  void* zero_vec = zero_bytes > 0 ? zero_out : nullptr;
  long long zero_vecs = static_cast<long long>(zero_bytes / 16);
  void* args[] = {&router_logits, &correction_bias, &topk_ids, &topk_weights, &m,
                  &rsf,           &x,               &q,        &qs,           &cols,
                  &zero,          &zero_n,          &zero_vec, &zero_vecs};
  const std::int64_t grid = (M + kRoutingWarps - 1) / kRoutingWarps +
                            routing_quant_blocks(shape, M, kRoutingWarps, quant);
  launch(routing_spec(shape, arch, quant != nullptr),
         cuda::Dim3{static_cast<unsigned>(grid), 1, 1}, kRoutingWarps * 32, stream, args, pdl);
}

void launch_route_align(const MoeShape& shape, int BLOCK_SIZE_M, const std::string& arch,
                        const float* router_logits, const float* correction_bias,
                        std::int32_t* topk_ids, float* topk_weights, std::int64_t M, int rank,
                        std::int32_t* sorted_token_ids, std::int32_t* expert_ids,
                        std::int32_t* num_tokens_post_padded, std::int64_t max_num_tokens_padded,
                        std::int64_t max_num_m_blocks, CUstream stream, bool pdl,
                        std::int32_t* zero_a, int zero_a_n, std::int32_t* zero_b,
                        int zero_b_n, const RoutingQuant* quant) {
  if (M <= 0) return;
  if (!route_align_fits(shape, M))
    throw InputError("M", std::to_string(M),
                     fmt::format("routing and alignment in one block take at most {} tokens and "
                                 "{} slots",
                                 kRouteAlignMaxTokens, kRouteAlignMaxSlots));
  if (shape.routing.correction_bias && correction_bias == nullptr)
    throw InputError("correction_bias", "null", "the routing needs a correction bias");
  long long m = M;
  float rsf = static_cast<float>(shape.routing.routed_scaling_factor);
  int e = shape.E;
  int start = rank * shape.E;
  long long mp = max_num_tokens_padded, mb = max_num_m_blocks;
  const void* x = quant ? quant->x : nullptr;
  std::uint8_t* q = quant ? quant->q : nullptr;
  float* qs = quant ? quant->scale : nullptr;
  int cols = shape.K;
  void* args[] = {&router_logits, &correction_bias, &topk_ids, &topk_weights,
                  &m,             &rsf,             &sorted_token_ids, &expert_ids,
                  &num_tokens_post_padded, &e, &start, &mp, &mb, &zero_a, &zero_a_n,
                  &zero_b,        &zero_b_n,        &x, &q, &qs, &cols};
  const std::int64_t grid = 1 + routing_quant_blocks(shape, M, kRouteAlignThreads / 32, quant);
  launch(route_align_spec(shape, BLOCK_SIZE_M, arch, quant != nullptr),
         cuda::Dim3{static_cast<unsigned>(grid), 1, 1}, kRouteAlignThreads, stream, args, pdl);
}

void launch_align(int BLOCK_SIZE_M, const std::string& arch, const std::int32_t* topk_ids,
                  std::int64_t M, int topk, int E, int rank, std::int32_t* sorted_token_ids,
                  std::int32_t* expert_ids, std::int32_t* num_tokens_post_padded,
                  std::int64_t max_num_tokens_padded, std::int64_t max_num_m_blocks,
                  CUstream stream, bool pdl, std::int32_t* zero_a, int zero_a_n,
                  std::int32_t* zero_b, int zero_b_n) {
  long long slots = M * topk;
  const int threads = slots <= kAlignSmallSlots ? kAlignSmallThreads : kAlignLargeThreads;
  int e = E;
  int start = rank * E;
  long long mp = max_num_tokens_padded, mb = max_num_m_blocks;
  void* args[] = {&topk_ids, &sorted_token_ids, &expert_ids, &num_tokens_post_padded,
                  &slots,    &e,                &start,      &mp,
                  &mb,       &zero_a,           &zero_a_n,   &zero_b,
                  &zero_b_n};
  launch(align_spec(BLOCK_SIZE_M, threads, arch), cuda::Dim3{1, 1, 1},
         static_cast<unsigned>(threads), stream, args, pdl);
}

void launch_quant(Dtype weight_dtype, int group, const std::string& arch, const void* x,
                  std::int64_t rows, int cols, std::uint8_t* q, float* scale, float* partials,
                  CUstream stream, bool pdl) {
  if (rows <= 0) return;
  long long r = rows;
  int c = cols;
  int num_partials = 0;
  unsigned grid;
  if (group == 0) {
    const std::int64_t vecs = rows * cols / 8;
    num_partials = static_cast<int>(
        std::clamp<std::int64_t>((vecs + kElementwiseThreads * 4 - 1) / (kElementwiseThreads * 4),
                                 1, kAmaxPartials));
    long long n = rows * cols;
    void* aargs[] = {&x, &n, &partials};
    launch(amax_spec(weight_dtype, arch), cuda::Dim3{static_cast<unsigned>(num_partials), 1, 1},
           kElementwiseThreads, stream, aargs, pdl);
    grid = grid_for(vecs, kElementwiseThreads * 4);
  } else {
    grid = grid_for(rows * (cols / group), kElementwiseThreads / 32);
  }
  const float* p = partials;
  void* args[] = {&x, &q, &scale, &p, &num_partials, &r, &c};
  launch(quant_spec(weight_dtype, group, arch), cuda::Dim3{grid, 1, 1}, kElementwiseThreads,
         stream, args, pdl);
}

void launch_silu_mul(const MoeShape& shape, const std::string& arch, const void* h, void* out,
                     const std::int32_t* topk_ids, std::int64_t M, int rank, CUstream stream,
                     bool pdl) {
  if (M <= 0) return;
  long long slots = M * shape.topk;
  int start = rank * shape.E;
  int e = shape.E;
  void* args[] = {&h, &out, &topk_ids, &slots, &start, &e};
  launch(silu_mul_spec(shape, arch),
         cuda::Dim3{grid_for(slots * (shape.N / 8), kElementwiseThreads), 1, 1},
         kElementwiseThreads, stream, args, pdl);
}

void launch_silu_mul_quant(const MoeShape& shape, const std::string& arch, const void* h,
                           std::uint8_t* q, float* scale, const std::int32_t* topk_ids,
                           std::int64_t M, int rank, CUstream stream, bool pdl) {
  if (M <= 0) return;
  const cuda::KernelSpec spec = silu_mul_quant_spec(shape, arch);  // throws unless block fp8
  long long slots = M * shape.topk;
  int start = rank * shape.E;
  int e = shape.E;
  void* args[] = {&h, &q, &scale, &topk_ids, &slots, &start, &e};
  const std::int64_t warps = slots * (shape.N / (*shape.block_shape)[1]);  // one per group
  launch(spec, cuda::Dim3{grid_for(warps * 32, kElementwiseThreads), 1, 1}, kElementwiseThreads,
         stream, args, pdl);
}

void launch_topk_reduce(const MoeShape& shape, const std::string& arch, const void* y, void* out,
                        const std::int32_t* topk_ids, std::int64_t M, int rank, CUstream stream,
                        bool pdl) {
  if (M <= 0) return;
  long long m = M;
  int start = rank * shape.E;
  int e = shape.E;
  // Every global expert on this rank: the kernel loads the rows with the ids, not after them.
  int all_local = start == 0 && shape.E >= shape.E_global ? 1 : 0;
  void* args[] = {&y, &out, &topk_ids, &m, &start, &e, &all_local};
  launch(topk_reduce_spec(shape, arch),
         cuda::Dim3{grid_for(M * (shape.K / 8), kElementwiseThreads), 1, 1}, kElementwiseThreads,
         stream, args, pdl);
}

}  // namespace moetune::moe
