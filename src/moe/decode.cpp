// The decode kernels' geometry, specs and launch: see decode.hpp.
#include "moe/decode.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "moe/stages.hpp"
#include "moetune/error.hpp"

namespace moetune::moe {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxRowsInRegisters = 64;  // moe_decode_down: 16-byte w2 vectors per lane

bool block_fp8(const MoeShape& s) { return s.dtype == Dtype::fp8_w8a8 && s.block_shape; }
int vec_elems(const MoeShape& s) { return block_fp8(s) ? 16 : 8; }  // per 16-byte load

// Lanes per weight row: the largest power of two <= 32 that divides the row's 16-byte vectors.
int lanes_per_row(int vectors) {
  int l = 32;
  while (l > 1 && vectors % l != 0) l /= 2;
  return l;
}

int routing_groups_floats(const MoeShape& s) {
  return s.routing.n_group > 1 ? s.E_global : 1;
}

}  // namespace

std::string decode_kernels_unfit(const MoeShape& s) {
  if (s.dtype == Dtype::fp8_w8a8 && !s.block_shape)
    return "per-tensor fp8 needs the global amax of the activation first";
  if (s.topk < 1 || s.N < 8 || s.K < 8 || s.N % 8 != 0 || s.K % 8 != 0)
    return "N and K must be multiples of 8";
  if (block_fp8(s)) {
    const int bk = (*s.block_shape)[1], bn = (*s.block_shape)[0];
    if (bk % 32 != 0 || s.K % bk != 0 || s.N % bk != 0 || bn < 1)
      return "block_k must be a multiple of 32 dividing N and K";
  }
  const int nc = s.N % 16 == 0 ? 16 : 8;
  const int up_floats = s.K + 2 * nc + routing_groups_floats(s);
  if (up_floats * 4 + 64 > kDecodeSmemBytes)
    return fmt::format("the hidden state ({} floats) exceeds the shared memory", s.K);
  const long long down_floats = static_cast<long long>(s.topk) * s.N + routing_groups_floats(s);
  if (down_floats * 4 + 8LL * s.topk + 64 > kDecodeSmemBytes)
    return fmt::format("a token's activations (topk x N = {} floats) exceed the shared memory",
                       static_cast<long long>(s.topk) * s.N);
  const int v = vec_elems(s);
  const int lpr_down = lanes_per_row(s.N / v);
  if (s.N / v % lpr_down != 0 || s.topk * (s.N / v / lpr_down) > kMaxRowsInRegisters)
    return "a token's w2 rows of one output column exceed the registers";
  const int lpr_up = lanes_per_row(s.K / v);
  if (2 * nc * lpr_up < 64) return "too few lanes per block for the hidden state's rows";
  if (s.K % (kThreads / lpr_down) != 0) return "K must be a multiple of the output tile";
  return "";
}

DecodeGeometry decode_geometry(const MoeShape& s) {
  const std::string why = decode_kernels_unfit(s);
  if (!why.empty()) throw InputError("shape", s.source.empty() ? "?" : s.source, why);
  const int v = vec_elems(s);
  DecodeGeometry g;
  g.nc = s.N % 16 == 0 ? 16 : 8;
  g.lpr_up = lanes_per_row(s.K / v);
  g.threads_up = std::min(kThreads, 2 * g.nc * g.lpr_up);  // every sub-warp >= one row
  g.lpr_down = lanes_per_row(s.N / v);
  g.threads_down = kThreads;
  g.hc = g.threads_down / g.lpr_down;  // one output column per sub-warp
  return g;
}

static cuda::KernelSpec decode_spec(const MoeShape& s, const std::string& arch, bool route,
                                    bool up) {
  const DecodeGeometry g = decode_geometry(s);
  cuda::KernelSpec k;
  k.file = "moe_decode.cuh";
  k.kernel = up ? "moetune::moe_decode_up" : "moetune::moe_decode_down";
  k.arch = arch;
  auto arg = [&](const char* n, long long v) { k.template_args.emplace_back(n, std::to_string(v)); };
  const bool f8 = block_fp8(s);
  arg("ACT", activation_code(s.dtype));
  k.template_args.emplace_back("WFP8", f8 ? "true" : "false");
  arg("K", s.K);
  arg("N", s.N);
  arg("TOPK", s.topk);
  arg("BN", f8 ? (*s.block_shape)[0] : 1);
  arg("BK", f8 ? (*s.block_shape)[1] : 32);
  arg(up ? "NC" : "HC", up ? g.nc : g.hc);
  arg("LPR", up ? g.lpr_up : g.lpr_down);
  arg("THREADS", up ? g.threads_up : g.threads_down);
  k.template_args.emplace_back("ROUTE", route ? "true" : "false");
  // The routing's own parameters, as routing_spec names them (without its launch shape).
  for (const auto& a : routing_spec(s, arch, false).template_args)
    if (a.first != "WARPS" && a.first != "ACT" && a.first != "QUANT_GROUP" && a.first != "TOPK")
      k.template_args.push_back(a);
  const std::string routing_name = routing_spec(s, arch, false).name.substr(
      std::string("moe_routing_").size());
  k.name = fmt::format("moe_decode_{}_{}_k{}_n{}_top{}{}_{}{}", up ? "up" : "down",
                       f8 ? fmt::format("fp8b{}x{}", (*s.block_shape)[0], (*s.block_shape)[1])
                          : std::string(to_string(s.dtype)),
                       s.K, s.N, s.topk, up ? fmt::format("_nc{}", g.nc) : fmt::format("_hc{}", g.hc),
                       route ? "route_" : "ids", route ? routing_name : "");
  return k;
}

cuda::KernelSpec decode_up_spec(const MoeShape& s, const std::string& arch, bool route) {
  return decode_spec(s, arch, route, true);
}
cuda::KernelSpec decode_down_spec(const MoeShape& s, const std::string& arch, bool route) {
  return decode_spec(s, arch, route, false);
}

void launch_decode(const MoeShape& s, const std::string& arch, const DecodeArgs& a,
                   CUstream stream, bool pdl) {
  if (a.M < 1 || a.M > kDecodeMaxTokens)
    throw InputError("M", std::to_string(a.M),
                     fmt::format("the decode kernels take 1..{} tokens", kDecodeMaxTokens));
  const DecodeGeometry g = decode_geometry(s);
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
  jit.get(decode_up_spec(s, arch, route))
      ->launch(cuda::Dim3{static_cast<unsigned>(s.N / g.nc), static_cast<unsigned>(a.M * s.topk), 1},
               cuda::Dim3{static_cast<unsigned>(g.threads_up), 1, 1}, 0, stream, up_args, lo);
  void* down_args[] = {&logits, &bias, &ids_in, &w_in, &rsf, &act, &w2, &w2s, &out, &start, &e};
  jit.get(decode_down_spec(s, arch, route))
      ->launch(cuda::Dim3{static_cast<unsigned>(s.K / g.hc), static_cast<unsigned>(a.M), 1},
               cuda::Dim3{static_cast<unsigned>(g.threads_down), 1, 1}, 0, stream, down_args, lo);
}

}  // namespace moetune::moe
