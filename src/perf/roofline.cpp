// The roofline floor of one MoE layer call, DESIGN.md "Roofline" term by term.
#include "moetune/roofline.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "moetune/error.hpp"

namespace moetune {
namespace {

constexpr double kActivationBytes = 2;  // bf16 input and output activations
constexpr int kMaxCrossoverM = 1 << 24;

void check_shape(const MoeShape& s) {
  if (s.E <= 0) throw InputError("E", std::to_string(s.E), "must be positive");
  if (s.E_global < s.E) {
    throw InputError("E_global", std::to_string(s.E_global), "must be at least E");
  }
  if (s.N <= 0) throw InputError("N", std::to_string(s.N), "must be positive");
  if (s.K <= 0) throw InputError("K", std::to_string(s.K), "must be positive");
  if (s.topk <= 0 || s.topk > s.E_global) {
    throw InputError("topk", std::to_string(s.topk), "must be in 1..E_global");
  }
}

void check_ceilings(const Ceilings& c) {
  if (!(c.bandwidth_Bps > 0)) {
    throw InputError("bandwidth_Bps", fmt::format("{}", c.bandwidth_Bps), "must be positive");
  }
  if (!(c.peak_flops > 0)) {
    throw InputError("peak_flops", fmt::format("{}", c.peak_flops), "must be positive");
  }
}

double ceil_div(double a, double b) { return std::ceil(a / b); }

}  // namespace

Ceilings spec_ceilings(const MoeShape& shape, const GpuSpec& gpu) {
  const std::optional<double> peak = gpu.peak_flops(shape.dtype);
  if (!peak) {
    throw InputError("dtype", std::string(to_string(shape.dtype)),
                     fmt::format("{} ({}) has no tensor-core peak for this dtype", gpu.name,
                                 gpu.arch()));
  }
  return Ceilings{gpu.mem_bandwidth_Bps, *peak};
}

Ceilings measured_ceilings(double copy_bandwidth_Bps, double mma_flops) {
  Ceilings c{copy_bandwidth_Bps, mma_flops};
  check_ceilings(c);
  return c;
}

double expert_weight_bytes(const MoeShape& shape) {
  const double N = shape.N, K = shape.K;
  double bytes = 3.0 * N * K * weight_bytes(shape.dtype);
  if (shape.dtype == Dtype::fp8_w8a8 && shape.block_shape) {
    const double bn = (*shape.block_shape)[0], bk = (*shape.block_shape)[1];
    if (!(bn > 0 && bk > 0)) {
      throw InputError("block_shape", fmt::format("[{}, {}]", bn, bk), "must be positive");
    }
    // w13_scale [2N/bn, K/bk] and w2_scale [K/bk, N/bn], fp32. Ceil only matters for shapes the
    // model loader already refuses (N or K not a multiple of the block).
    const double scales = ceil_div(2 * N, bn) * ceil_div(K, bk) + ceil_div(K, bk) * ceil_div(N, bn);
    bytes += scales * 4;
  }
  return bytes;
}

double expected_active_experts(const MoeShape& shape, int M) {
  // E * (1 - (1 - topk/E_global)^M), written with log1p/expm1 so it stays exact for small
  // topk/E_global and huge M.
  const double p = static_cast<double>(shape.topk) / shape.E_global;
  return shape.E * -std::expm1(M * std::log1p(-p));
}

RooflineRow roofline_row(const MoeShape& shape, const Ceilings& c, int M) {
  check_shape(shape);
  check_ceilings(c);
  if (M < 1) throw InputError("batch", std::to_string(M), "must be at least 1");

  RooflineRow r;
  r.M = M;
  r.expected_experts = expected_active_experts(shape, M);
  const double activation_bytes = 2.0 * M * shape.K * kActivationBytes;  // input + output
  r.bytes = r.expected_experts * expert_weight_bytes(shape) + activation_bytes;
  r.flops = 6.0 * M * shape.topk * (static_cast<double>(shape.E) / shape.E_global) * shape.N *
            shape.K;
  r.t_mem_us = r.bytes / c.bandwidth_Bps * 1e6;
  r.t_compute_us = r.flops / c.peak_flops * 1e6;
  r.floor_us = std::max(r.t_mem_us, r.t_compute_us);
  r.bound = r.t_compute_us > r.t_mem_us ? "compute" : "memory";
  return r;
}

std::vector<RooflineRow> roofline(const MoeShape& shape, const Ceilings& c,
                                  const std::vector<int>& batch) {
  std::vector<RooflineRow> rows;
  rows.reserve(batch.size());
  for (int M : batch) rows.push_back(roofline_row(shape, c, M));
  return rows;
}

int crossover_M(const MoeShape& shape, const Ceilings& c) {
  // flops grow linearly in M while bytes grow concavely, so t_compute/t_mem rises with M and
  // "compute-bound" is monotone: double until it holds, then bisect.
  auto compute_bound = [&](int M) { return roofline_row(shape, c, M).bound == "compute"; };
  if (compute_bound(1)) return 1;
  int lo = 1, hi = 2;  // invariant: lo memory-bound
  while (!compute_bound(hi)) {
    if (hi >= kMaxCrossoverM) return -1;
    lo = hi;
    hi = std::min(hi * 2, kMaxCrossoverM);
  }
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    (compute_bound(mid) ? hi : lo) = mid;
  }
  return hi;
}

double pct_of_floor(const RooflineRow& row, double time_s) {
  if (!(time_s > 0)) throw InputError("time_s", fmt::format("{}", time_s), "must be positive");
  return row.floor_us * 1e-6 / time_s * 100.0;
}

}  // namespace moetune
