// The decode kernels' geometry, specs and launch: see decode.hpp.
#include "moe/decode.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "moe/stages.hpp"
#include "moetune/gpu_spec.hpp"
#include "moetune/error.hpp"

namespace moetune::moe {
namespace {

bool block_fp8(const MoeShape& s) { return s.dtype == Dtype::fp8_w8a8 && s.block_shape; }
int elem_bytes(const MoeShape& s) { return block_fp8(s) ? 1 : 2; }

int routing_floats(const MoeShape& s) { return s.routing.n_group > 1 ? s.E_global : 1; }

constexpr int kMaxBatch = 8;  // 64-byte chunks per row in flight per lane (two uint4 each)

bool splits(const MoeShape& s, int wpt) {
  const long long row_bytes = static_cast<long long>(s.K) * elem_bytes(s);
  const int unit = block_fp8(s) ? (*s.block_shape)[1] : 64;  // bytes
  return row_bytes % (static_cast<long long>(wpt) * unit) == 0 && row_bytes / wpt % 64 == 0;
}

int chunks_per_warp(const MoeShape& s, int wpt) {
  return static_cast<int>(static_cast<long long>(s.K) * elem_bytes(s) / wpt / 64);
}

// Warps per 16-row tile of moe_decode_up: 4 (8 warps, a gate and an up tile) where K allows,
// each warp's slice of a row a whole number of 64-byte chunks (and of fp8 scale blocks).
int warps_per_tile(const MoeShape& s) {
  for (int wpt : {4, 2, 1})
    if (splits(s, wpt)) return wpt;
  return 0;
}

}  // namespace

std::string decode_kernels_unfit(const MoeShape& s) {
  if (s.dtype == Dtype::fp8_w8a8 && !s.block_shape)
    return "per-tensor fp8 needs the global amax of the activation first";
  if (s.topk < 1 || s.topk > 32) return "topk must be in [1, 32] (one warp per slot)";
  const int es = elem_bytes(s);
  if (s.N % 16 != 0 || (s.N * es) % 64 != 0)
    return block_fp8(s) ? "N must be a multiple of 64" : "N must be a multiple of 32";
  if (s.K % 16 != 0 || (s.K * es) % 64 != 0)
    return block_fp8(s) ? "K must be a multiple of 64" : "K must be a multiple of 32";
  if (block_fp8(s)) {
    const int bn = (*s.block_shape)[0], bk = (*s.block_shape)[1];
    if (bk % 128 != 0 || s.K % bk != 0 || s.N % bk != 0)
      return "block_k must be a multiple of 128 dividing N and K";
    if (bn % 16 != 0 || s.K % bn != 0 || (2 * s.N) % bn != 0)
      return "block_n must be a multiple of 16 dividing K and 2N";
  }
  if (s.N > 4096)  // moe_decode_down: one warp holds a slot's act row in registers on its way
    return "N must be at most 4096";
  const int wpt = warps_per_tile(s);
  if (wpt == 0) return "K's row bytes do not split into 64-byte chunks";
  if (block_fp8(s)) {  // a loader warp's share of the hidden state's quantization in registers
    const int block_k = (*s.block_shape)[1], loaders = 2 * wpt - 1;
    if ((s.K / block_k + loaders - 1) / loaders * (block_k / 32) > 128)
      return "the hidden state is too long for the loader warps";
  }
  // Shared memory as the kernels declare it: moe_decode_up's hidden state, its scales, the
  // routing's group scores and s_part at 16 warps; moe_decode_down's activations, scales,
  // s_y/s_e/s_w per slot and the group scores.
  const int bk = block_fp8(s) ? (*s.block_shape)[1] : 0;
  const long long up_bytes = static_cast<long long>(s.K) * es + 4LL * routing_floats(s) +
                             (bk > 0 ? 4LL * s.K / bk : 4) + 128LL * 8 + 16;
  if (up_bytes > kDecodeSmemBytes)
    return fmt::format("the hidden state (K = {}) exceeds the shared memory", s.K);
  const long long down_bytes = static_cast<long long>(s.topk) * s.N * es +
                               4LL * s.topk * (bk > 0 ? s.N / bk : 1) + 72LL * s.topk +
                               4LL * routing_floats(s);
  if (down_bytes > kDecodeSmemBytes)
    return fmt::format("a token's activations (topk x N = {} values) exceed the shared memory",
                       static_cast<long long>(s.topk) * s.N);
  return "";
}

int decode_bulk_smem_bytes(int cc) {
  if (cc == 90 || (cc >= 100 && cc < 110)) return 227 * 1024;
  if (cc >= 120 && cc < 130) return 99 * 1024;
  return 0;
}

DecodeGeometry decode_geometry(const MoeShape& s, std::int64_t M, int cc, const DecodeGpu& gpu) {
  const std::string why = decode_kernels_unfit(s);
  if (!why.empty()) throw InputError("shape", s.source.empty() ? "?" : s.source, why);
  DecodeGeometry g;
  g.wpt = warps_per_tile(s);
  const int unit = block_fp8(s) ? (*s.block_shape)[1] / 64 : 1;  // chunks per scale block
  if (M <= 1 && splits(s, 8) && chunks_per_warp(s, 8) >= 14) {
    // One block per SM at M = 1 (N/16 * topk blocks): 16 warps keep more bytes in flight.
    // Measured (bench/results/2026-12-01_h200_eighth_session.md, call 5): DeepSeek-V3 fp8 (14
    // chunks per warp)
    // 24.9 µs against 28.7 with 8 warps; Qwen3.5 fp8 (6) and bf16 (12) were slower with 16.
    g.wpt = 8;
    g.batch = std::max(unit, kMaxBatch / unit * unit);  // the last batch may be partial
  } else {
    // Several blocks per SM: batches that divide the slice (fewer registers; DeepSeek-V3 fp8
    // M = 4: 70.6 µs with 4-chunk batches, 80.0 with 8 + a partial one).
    const int chunks = chunks_per_warp(s, g.wpt);
    g.batch = unit;
    for (int b = unit; b <= kMaxBatch && b <= chunks; b += unit)
      if (chunks % b == 0) g.batch = b;
  }
  g.threads_up = 64 * g.wpt;
  g.threads_down = 32 * s.topk;
  if (M <= 1 && decode_bulk_smem_bytes(cc) > 0) {
    // One block per SM at M = 1: the whole share in flight by bulk copies (the register batches
    // keep ~4 loads per warp in flight: bench/results/2026-12-01_h200_tenth_session.md, call 4).
    // The kernel's layout: 2 * wpt warps x 16 rows x the slice, padded to 64 mod 128 bytes.
    const int slice = chunks_per_warp(s, g.wpt) * 64;
    const int stride = slice % 128 == 0 ? slice + 64 : slice;
    const long long dyn = 2LL * g.wpt * 16 * stride;
    const long long stat = static_cast<long long>(s.K) * elem_bytes(s) + 4LL * routing_floats(s) +
                           (block_fp8(s) ? 4LL * s.K / (*s.block_shape)[1] : 4) +
                           128LL * g.wpt + 16 + 16LL * 2 * g.wpt * 2;
    const long long limit = gpu.smem_per_block > 0
                                ? std::min(gpu.smem_per_block, decode_bulk_smem_bytes(cc))
                                : decode_bulk_smem_bytes(cc);
    // Blocks per SM at this size: an SM holds the per-block limit plus the 1 KB the driver keeps
    // per block (228 KB on 9.0 and 10.x, 100 KB on 12.x).
    const long long per_sm = (limit + kSmemReservedPerBlock) / (dyn + stat + kSmemReservedPerBlock);
    const long long blocks = static_cast<long long>(s.N / g.cols) * s.topk;
    const bool one_wave = gpu.sms <= 0 || blocks <= per_sm * gpu.sms;
    if (dyn + stat <= limit && one_wave) {
      g.pieces = chunks_per_warp(s, g.wpt) % 2 == 0 ? 2 : 1;
      g.smem_up = static_cast<int>(dyn);
    }
  }
  return g;
}

std::int64_t decode_max_tokens(const MoeShape& s) {
  if (!decode_kernels_unfit(s).empty()) return 0;
  const long long row_bytes = static_cast<long long>(s.K) * elem_bytes(s);
  return row_bytes <= kDecodeRowBytes4 ? kDecodeMaxTokens : row_bytes <= kDecodeRowBytes2 ? 2 : 0;
}

static int arch_cc(const std::string& arch) { return arch_compute_capability(arch).value_or(0); }

static cuda::KernelSpec decode_spec(const MoeShape& s, const std::string& arch, bool route,
                                    bool up, std::int64_t M, const DecodeGpu& gpu) {
  const DecodeGeometry g = decode_geometry(s, M, arch_cc(arch), gpu);
  cuda::KernelSpec k;
  k.file = "moe_decode.cuh";
  k.kernel = up ? "moetune::moe_decode_up" : "moetune::moe_decode_down";
  k.arch = arch;
  auto arg = [&](const char* n, long long v) {
    k.template_args.emplace_back(n, std::to_string(v));
  };
  const bool f8 = block_fp8(s);
  arg("ACT", activation_code(s.dtype));
  k.template_args.emplace_back("WFP8", f8 ? "true" : "false");
  arg("K", s.K);
  arg("N", s.N);
  arg("TOPK", s.topk);
  arg("BN", f8 ? (*s.block_shape)[0] : 16);
  arg("BK", f8 ? (*s.block_shape)[1] : 128);
  if (up) {
    arg("WPT", g.wpt);
    arg("BATCH", g.batch);
    arg("PIECES", g.pieces);
  }
  k.template_args.emplace_back("ROUTE", route ? "true" : "false");
  // The routing's own parameters, as routing_spec names them (not its launch shape or TOPK).
  const cuda::KernelSpec r = routing_spec(s, arch, false);
  for (const auto& a : r.template_args)
    if (a.first != "WARPS" && a.first != "ACT" && a.first != "QUANT_GROUP" && a.first != "TOPK")
      k.template_args.push_back(a);
  // moe_decode_down: whether the up kernel at this M routes and takes the bulk path (it then
  // routes the ids only, and this kernel writes the routing's outputs; from precomputed ids one
  // kernel serves every M).
  const bool up_bulk = route && g.pieces > 0;
  if (!up) k.template_args.emplace_back("UP_BULK", up_bulk ? "true" : "false");
  k.name = fmt::format("moe_decode_{}_{}_k{}_n{}_top{}{}_{}{}", up ? "up" : "down",
                       f8 ? fmt::format("fp8b{}x{}", (*s.block_shape)[0], (*s.block_shape)[1])
                          : std::string(to_string(s.dtype)),
                       s.K, s.N, s.topk,
                       up ? g.pieces > 0 ? fmt::format("_w{}p{}", g.wpt, g.pieces)
                                         : fmt::format("_w{}b{}", g.wpt, g.batch)
                          : up_bulk ? std::string("_ub") : std::string(),
                       route ? "route_" : "ids",
                       route ? r.name.substr(std::string("moe_routing_").size()) : "");
  return k;
}

cuda::KernelSpec decode_up_spec(const MoeShape& s, const std::string& arch, bool route,
                                std::int64_t M, const DecodeGpu& gpu) {
  return decode_spec(s, arch, route, true, M, gpu);
}
cuda::KernelSpec decode_down_spec(const MoeShape& s, const std::string& arch, bool route,
                                  std::int64_t M, const DecodeGpu& gpu) {
  return decode_spec(s, arch, route, false, M, gpu);
}

void launch_decode(const MoeShape& s, const std::string& arch, const DecodeArgs& a,
                   CUstream stream, bool pdl, const DecodeGpu& gpu) {
  if (a.M < 1 || a.M > kDecodeMaxTokens)
    throw InputError("M", std::to_string(a.M),
                     fmt::format("the decode kernels take 1..{} tokens", kDecodeMaxTokens));
  const DecodeGeometry g = decode_geometry(s, a.M, arch_cc(arch), gpu);
  const bool route = a.router_logits != nullptr;
  if (!route && (a.topk_ids_in == nullptr || a.topk_weights_in == nullptr))
    throw InputError("topk_ids", "null", "router_logits or topk_ids and topk_weights are needed");
  if (route && s.routing.correction_bias && a.correction_bias == nullptr)
    throw InputError("correction_bias", "null", "the routing needs a correction bias");
  float rsf = static_cast<float>(s.routing.routed_scaling_factor);
  int start = a.rank * s.E;
  int e = s.E;
  const float* logits = a.router_logits;
  const float* bias = a.correction_bias;
  const std::int32_t* ids_in = a.topk_ids_in;
  const float* w_in = a.topk_weights_in;
  std::int32_t* ids_out = a.topk_ids_out;
  float* w_out = a.topk_weights_out;
  const void* x = a.x;
  const void* w13 = a.w13;
  const float* w13s = a.w13_scale;
  const void* w2 = a.w2;
  const float* w2s = a.w2_scale;
  void* act = a.act;
  void* out = a.out;
  cuda::LaunchOptions lo;
  lo.pdl = pdl;
  auto& jit = cuda::Jit::instance();
  void* up_args[] = {&logits, &bias, &ids_in, &w_in, &ids_out, &w_out, &rsf,
                     &x,      &w13,  &w13s,   &act,  &start,   &e};
  jit.get(decode_up_spec(s, arch, route, a.M, gpu))
      ->launch(cuda::Dim3{static_cast<unsigned>(s.N / g.cols),
                          static_cast<unsigned>(a.M * s.topk), 1},
               cuda::Dim3{static_cast<unsigned>(g.threads_up), 1, 1},
               static_cast<std::size_t>(g.smem_up), stream, up_args, lo);
  // The routing's outputs: moe_decode_up's register path writes them, its bulk path leaves them
  // to moe_decode_down (UP_BULK, kernels/moe_decode.cuh).
  void* down_args[] = {&logits, &bias, &ids_in, &w_in, &ids_out, &w_out, &rsf,
                       &act,    &w2,   &w2s,    &out,  &start,   &e};
  jit.get(decode_down_spec(s, arch, route, a.M, gpu))
      ->launch(cuda::Dim3{static_cast<unsigned>(s.K / g.cols), static_cast<unsigned>(a.M), 1},
               cuda::Dim3{static_cast<unsigned>(g.threads_down), 1, 1}, 0, stream, down_args, lo);
}

}  // namespace moetune::moe
