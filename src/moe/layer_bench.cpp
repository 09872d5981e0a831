// The whole-layer and GEMM-phase measurement of `moetune bench`, and `--vs`: see profile.hpp.
#include <algorithm>
#include <cmath>

#include "moe/bench_data.hpp"
#include "moe/parallel.hpp"
#include "moe/reference.hpp"
#include "moetune/error.hpp"
#include "perf/splitmix64.hpp"

namespace moetune::moe {
namespace {

using Rng = SplitMix64;

// Fills n elements in parallel with f(rng) -> element.
template <typename T, typename F>
std::vector<T> random_vector(std::size_t n, std::uint64_t seed, F f) {
  std::vector<T> v(n);
  parallel_chunks(static_cast<std::int64_t>(n), kSeedChunks,
                  [&](std::int64_t lo, std::int64_t hi, std::uint64_t c) {
                    Rng r{seed * 0x100000001b3ULL + c + 1};
                    for (std::int64_t i = lo; i < hi; ++i) v[i] = f(r);
                  });
  return v;
}

double active_experts(const MoeShape& s, std::int64_t M) {
  return s.E * (1.0 - std::pow(1.0 - double(s.topk) / s.E_global, double(M)));
}

}  // namespace

void make_bench_weights(const FusedMoe& moe, std::uint64_t seed, BenchData& d) {
  const MoeShape& s = moe.shape();
  const std::size_t n13 = std::size_t(s.E) * 2 * s.N * s.K, n2 = std::size_t(s.E) * s.K * s.N;
  const Dtype act = activation_dtype(s.dtype);
  if (s.dtype == Dtype::fp8_w8a8) {
    auto code = [](Rng& r) {  // any finite e4m3 code of magnitude <= 2 (exponent field <= 8)
      const auto b = static_cast<std::uint8_t>(r.next());
      return static_cast<std::uint8_t>((b & 0x80) | (b & 0x47));
    };
    d.w13 = cuda::to_device(random_vector<std::uint8_t>(n13, seed + 1, code));
    d.w2 = cuda::to_device(random_vector<std::uint8_t>(n2, seed + 2, code));
    std::size_t s13 = s.E, s2 = s.E;
    if (s.block_shape) {
      const int bn = (*s.block_shape)[0], bk = (*s.block_shape)[1];
      s13 = std::size_t(s.E) * (2 * s.N / bn) * (s.K / bk);
      s2 = std::size_t(s.E) * (s.K / bn) * (s.N / bk);
    }
    const double a = 1.0 / std::sqrt(double(s.K)), b = 1.0 / std::sqrt(double(s.N));
    d.w13_scale = cuda::to_device(random_vector<float>(s13, seed + 3, [a](Rng& r) {
      return static_cast<float>(a * (0.5 + r.uniform()));
    }));
    d.w2_scale = cuda::to_device(random_vector<float>(s2, seed + 4, [b](Rng& r) {
      return static_cast<float>(b * (0.5 + r.uniform()));
    }));
  } else {
    const double a = 1.7 / std::sqrt(double(s.K)), b = 1.7 / std::sqrt(double(s.N));
    d.w13 = cuda::to_device(random_vector<std::uint16_t>(n13, seed + 1, [&](Rng& r) {
      return double_to_half_bits(act, (2 * r.uniform() - 1) * a);
    }));
    d.w2 = cuda::to_device(random_vector<std::uint16_t>(n2, seed + 2, [&](Rng& r) {
      return double_to_half_bits(act, (2 * r.uniform() - 1) * b);
    }));
  }
  if (s.routing.correction_bias)
    d.bias = cuda::to_device(random_vector<float>(s.E_global, seed + 5, [](Rng& r) {
      return static_cast<float>((r.uniform() - 0.5) * 1e-4);  // tiny: routing stays uniform
    }));
  d.weights.w13 = reinterpret_cast<const void*>(d.w13.ptr());
  d.weights.w2 = reinterpret_cast<const void*>(d.w2.ptr());
  d.weights.w13_scale = d.w13_scale.empty() ? nullptr : d.w13_scale.as<const float>();
  d.weights.w2_scale = d.w2_scale.empty() ? nullptr : d.w2_scale.as<const float>();
  d.weights.correction_bias = d.bias.empty() ? nullptr : d.bias.as<const float>();
}

void make_bench_sets(const FusedMoe& moe, std::int64_t M, int rotation, std::size_t max_set_bytes,
                     std::uint64_t seed, BenchData& d, CUstream stream) {
  const MoeShape& s = moe.shape();
  const Dtype act = activation_dtype(s.dtype);
  d.sets.clear();
  d.M = M;
  d.workspace_bytes = moe.workspace_bytes(M);
  const std::size_t per_set = d.workspace_bytes + std::size_t(M) * s.K * 4 +
                              std::size_t(M) * s.E_global * 4;
  const int fit = static_cast<int>(std::max<std::size_t>(1, max_set_bytes / std::max<std::size_t>(per_set, 1)));
  const int n = std::max(1, std::min(rotation, fit));
  for (int i = 0; i < n; ++i) {
    BenchSet set;
    set.hidden = cuda::to_device(random_vector<std::uint16_t>(std::size_t(M) * s.K, seed + 100 + i,
                                                              [&](Rng& r) {
      return double_to_half_bits(act, 2 * r.uniform() - 1);
    }));
    set.logits = cuda::to_device(random_vector<float>(std::size_t(M) * s.E_global, seed + 200 + i,
                                                      [](Rng& r) {
      return static_cast<float>(4 * r.uniform() - 2);
    }));
    set.workspace = cuda::DeviceBuffer(std::max<std::size_t>(d.workspace_bytes, 256));
    set.out = cuda::DeviceBuffer(std::size_t(M) * s.K * 2);
    FusedMoe::init_workspace(reinterpret_cast<void*>(set.workspace.ptr()), set.workspace.bytes(),
                             stream);
    set.inputs.M = M;
    set.inputs.hidden = reinterpret_cast<const void*>(set.hidden.ptr());
    set.inputs.router_logits = set.logits.as<const float>();
    // The stage kernels leave every intermediate (alignment tables, quantized inputs) that the
    // GEMM phase and the stage timings read; where forward() runs the decode kernels, which
    // write none of them (the GEMM phase then ran on zeroed tables: gemm_us 4.5 µs at M = 1).
    moe.forward_staged(set.inputs, d.weights, reinterpret_cast<void*>(set.out.ptr()),
                       reinterpret_cast<void*>(set.workspace.ptr()), set.workspace.bytes(), stream);
    if (moe.uses_decode_kernels(M))  // and the decode kernels' first (eager) run
      moe.forward(set.inputs, d.weights, reinterpret_cast<void*>(set.out.ptr()),
                  reinterpret_cast<void*>(set.workspace.ptr()), set.workspace.bytes(), stream);
    d.sets.push_back(std::move(set));
  }
}

StageCost stage_cost(const MoeShape& s, MoeStage stage, std::int64_t M, bool router_logits,
                     bool fused_act) {
  const double m = double(M), slots = m * s.topk;
  const double local = slots * double(s.E) / s.E_global;  // slots on this rank
  const bool fp8 = s.dtype == Dtype::fp8_w8a8;
  const bool block = fp8 && s.block_shape.has_value();
  const double wb = weight_bytes(s.dtype), ab = fp8 ? 1.0 : 2.0;
  const int bk = block ? (*s.block_shape)[1] : 0, bn = block ? (*s.block_shape)[0] : 0;
  const double experts = active_experts(s, M);
  StageCost c;
  switch (stage) {
    case MoeStage::routing:
      if (router_logits) c.bytes = m * s.E_global * 4 + slots * 8;
      // One launch aligns too at decode sizes: the sorted slots (its ids stay on chip).
      if (routing_fuses_align(s, M, router_logits)) c.bytes += local * 4;
      if (routing_fuses_quant(s, router_logits))  // and the hidden states' quantization
        c.bytes += m * s.K * 2 + m * s.K + m * (s.K / bk) * 4;
      break;
    case MoeStage::align:
      if (!routing_fuses_align(s, M, router_logits))
        c.bytes = slots * 4 + local * 4;  // read the ids, write the sorted slots
      break;
    case MoeStage::quant:
      if (fp8 && !routing_fuses_quant(s, router_logits)) c.bytes = m * s.K * 2 + m * s.K + (block ? m * (s.K / bk) * 4 : 4);
      break;
    case MoeStage::gemm1:
      c.bytes = experts * (2.0 * s.N * s.K * wb + (block ? (2.0 * s.N / bn) * (s.K / bk) * 4 : 0)) +
                m * s.K * ab;
      // Its output: [slots, 2N] 16-bit, or fused the activation (block fp8: e4m3 and scales).
      if (!fused_act) c.bytes += local * 2 * s.N * 2;
      else if (block) c.bytes += local * s.N + local * (s.N / bk) * 4;
      else c.bytes += local * s.N * 2;
      c.flops = 2.0 * local * 2 * s.N * s.K;
      break;
    case MoeStage::act:
      if (fused_act) break;  // inside gemm1
      c.bytes = slots * 2 * s.N * 2;  // read h
      if (block)  // one kernel: write the fp8 activation and its scales
        c.bytes += slots * s.N + slots * (s.N / bk) * 4;
      else  // write SiLU·up; per-tensor fp8 reads it back and writes the fp8 copy
        c.bytes += slots * s.N * 2 + (fp8 ? slots * s.N * 2 + slots * s.N : 0);
      break;
    case MoeStage::gemm2:
      c.bytes = experts * (double(s.K) * s.N * wb + (block ? (double(s.K) / bn) * (s.N / bk) * 4 : 0)) +
                local * s.N * ab + local * s.K * 2;
      c.flops = 2.0 * local * s.K * s.N;
      break;
    case MoeStage::reduce:
      c.bytes = local * s.K * 2 + m * s.K * 2;
      break;
  }
  return c;
}

bench::MeasureOptions prepare_bench_sets(const FusedMoe& moe, std::int64_t M,
                                         const BenchOptions& opts, BenchData& d,
                                         cuda::Stream& stream) {
  make_bench_sets(moe, M, opts.hot ? 1 : opts.rotation, opts.max_set_bytes, opts.seed + M, d,
                  stream);
  stream.synchronize();
  bench::MeasureOptions mo = opts.measure;
  mo.rotation = static_cast<int>(d.sets.size());
  mo.hot = opts.hot || mo.rotation < 2;  // one set only: say so (the row's hot)
  return mo;
}

std::vector<LayerBenchRow> layer_bench(const FusedMoe& moe, const GpuSpec& gpu,
                                       const BenchOptions& opts) {
  const MoeShape& s = moe.shape();
  const Ceilings spec = spec_ceilings(s, gpu);
  std::optional<Ceilings> meas;
  if (opts.measured) meas = opts.measured->for_dtype(s.dtype);
  cuda::Stream stream;
  BenchData d;
  make_bench_weights(moe, opts.seed, d);
  std::vector<LayerBenchRow> rows;
  for (std::int64_t M : opts.batch) {
    const bench::MeasureOptions mo = prepare_bench_sets(moe, M, opts, d, stream);
    auto layer = [&](CUstream st, int i) {
      const BenchSet& b = d.sets[i % d.sets.size()];
      moe.forward(b.inputs, d.weights, reinterpret_cast<void*>(b.out.ptr()),
                  reinterpret_cast<void*>(b.workspace.ptr()), b.workspace.bytes(), st);
    };
    auto phase = [&](CUstream st, int i) {
      const BenchSet& b = d.sets[i % d.sets.size()];
      moe.enqueue_gemm_phase(b.inputs, d.weights, reinterpret_cast<void*>(b.workspace.ptr()),
                             b.workspace.bytes(), st);
    };
    const bench::Samples ls = bench::measure(layer, mo);
    const bench::Samples ps = bench::measure(phase, mo);
    LayerBenchRow r;
    r.M = M;
    r.up = moe.up_config(M);
    r.down = moe.down_config(M);
    r.hot = mo.hot;
    r.rotation = mo.hot ? 1 : mo.rotation;
    r.layer_kernels = moe.layer_kernels(M);
    r.layer = ls.summary();
    r.gemm_phase = ps.summary();
    r.layer_s = ls.kept_s();
    r.gemm_phase_s = ps.kept_s();
    r.clock = ls.clock;
    r.roofline = roofline_row(s, spec, static_cast<int>(M));
    const double floor_s = r.roofline.floor_us * 1e-6;
    if (r.layer.median_s > 0) {
      r.layer_GBps = r.roofline.bytes / r.layer.median_s / 1e9;
      r.layer_TFLOPs = r.roofline.flops / r.layer.median_s / 1e12;
      r.pct_floor = 100.0 * floor_s / r.layer.median_s;
    }
    if (r.gemm_phase.median_s > 0) r.gemm_phase_pct_floor = 100.0 * floor_s / r.gemm_phase.median_s;
    if (meas) {
      r.floor_measured_us = roofline_row(s, *meas, static_cast<int>(M)).floor_us;
      if (r.layer.median_s > 0)
        r.pct_floor_measured = 100.0 * r.floor_measured_us * 1e-6 / r.layer.median_s;
    }
    rows.push_back(std::move(r));
  }
  return rows;
}

std::vector<LayerComparison> compare(const std::vector<LayerBenchRow>& a,
                                     const std::vector<LayerBenchRow>& b) {
  std::vector<LayerComparison> out;
  for (const auto& ra : a) {
    const auto it = std::find_if(b.begin(), b.end(), [&](const LayerBenchRow& rb) {
      return rb.M == ra.M;
    });
    if (it == b.end()) continue;
    LayerComparison c;
    c.M = ra.M;
    c.layer = moetune::compare(ra.layer_s, it->layer_s);
    c.gemm_phase = moetune::compare(ra.gemm_phase_s, it->gemm_phase_s);
    out.push_back(c);
  }
  return out;
}

}  // namespace moetune::moe
