// Shared pieces of the grouped-GEMM GPU tests (test_gemm_mma.cpp, test_gemm_speed.cpp): host
// number formats, random routing, the alignment built on the host (SGLang moe_align_block_size
// semantics), device problem sets, and the fp64 reference of one GEMM on sampled slots; with
// tests/unit/gemm_test_util.hpp (make_shape, cfg).
// No dependency on the moe stage: everything the GEMM reads is made here.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "cuda/device.hpp"
#include "gemm/gemm.hpp"
#include "moetune/model.hpp"
#include "tests/unit/gemm_test_util.hpp"  // make_shape, cfg

namespace moetune::gemm::testing {

// ---- number formats ----------------------------------------------------------------------------
inline float bf16_to_float(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t float_to_bf16(float f) {  // round to nearest even
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float fp16_to_float(uint16_t h) {
  const int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  float v;
  if (e == 0) v = std::ldexp(static_cast<float>(m), -24);
  else if (e == 31) v = m ? NAN : INFINITY;
  else v = std::ldexp(static_cast<float>(m | 1024), e - 25);
  return s ? -v : v;
}
inline uint16_t float_to_fp16(float f) {  // normal range only (test data stays in it)
  if (f == 0.f) return 0;
  const uint16_t s = f < 0 ? 0x8000 : 0;
  f = std::fabs(f);
  int e;
  const float m = std::frexp(f, &e);  // f = m * 2^e, m in [0.5, 1)
  int he = e + 14;
  if (he <= 0) {  // subnormal
    const int mant = static_cast<int>(std::nearbyint(std::ldexp(f, 24)));
    return static_cast<uint16_t>(s | mant);
  }
  int mant = static_cast<int>(std::nearbyint((m * 2.f - 1.f) * 1024.f));
  if (mant == 1024) {
    mant = 0;
    ++he;
  }
  return static_cast<uint16_t>(s | (he << 10) | mant);
}
inline float e4m3_to_float(uint8_t b) {
  const int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
  float v;
  if (e == 0) v = std::ldexp(static_cast<float>(m), -9);
  else if (e == 15 && m == 7) v = NAN;
  else v = std::ldexp(static_cast<float>(m | 8), e - 10);
  return s ? -v : v;
}

// ---- random numbers (fast, seeded) -------------------------------------------------------------
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ULL + 0x632BE59BD9B4E019ULL) {}
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  float uniform() { return static_cast<float>(next() >> 40) * (1.f / 16777216.f); }  // [0,1)
  float sym() { return 2.f * uniform() - 1.f; }                                         // [-1,1)
};

// Fills n elements of `bytes` each with random values of the dtype, scaled to `scale`, on many
// threads. bf16/fp16: uniform in [-scale, scale); fp8: random e4m3 codes of magnitude <= 2^4
// (exponent field <= 11; never NaN), independent of scale.
inline void fill_random(std::vector<uint8_t>& out, std::size_t n, Dtype d, float scale,
                        uint64_t seed) {
  const int bytes = weight_bytes(d);
  out.resize(n * bytes);
  const unsigned threads = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      Rng rng(seed * 1315423911ULL + t);
      const std::size_t lo = n * t / threads, hi = n * (t + 1) / threads;
      for (std::size_t i = lo; i < hi; ++i) {
        if (d == Dtype::fp8_w8a8) {
          const uint64_t r = rng.next();
          const uint8_t e = static_cast<uint8_t>(r % 12);  // exponent field 0..11
          const uint8_t m = static_cast<uint8_t>((r >> 8) & 7);
          const uint8_t s = static_cast<uint8_t>((r >> 16) & 1);
          out[i] = static_cast<uint8_t>((s << 7) | (e << 3) | m);
        } else {
          const float v = rng.sym() * scale;
          const uint16_t h = d == Dtype::fp16 ? float_to_fp16(v) : float_to_bf16(v);
          std::memcpy(&out[i * 2], &h, 2);
        }
      }
    });
  for (auto& th : pool) th.join();
}

inline float element(const std::vector<uint8_t>& buf, std::size_t i, Dtype d) {
  if (d == Dtype::fp8_w8a8) return e4m3_to_float(buf[i]);
  uint16_t h;
  std::memcpy(&h, &buf[i * 2], 2);
  return d == Dtype::fp16 ? fp16_to_float(h) : bf16_to_float(h);
}
// Output element (bf16, fp16 for fp16 shapes).
inline float out_element(const std::vector<uint16_t>& buf, std::size_t i, Dtype d) {
  return d == Dtype::fp16 ? fp16_to_float(buf[i]) : bf16_to_float(buf[i]);
}

// ---- routing and alignment ---------------------------------------------------------------------
struct Routing {
  std::vector<int32_t> topk_ids;      // [M*topk] (slot -> expert)
  std::vector<float> topk_weights;    // [M*topk]
  std::vector<int32_t> sorted_token_ids;  // [capacity]
  std::vector<int32_t> expert_ids;        // [capacity / BM]
  int32_t num_tokens_post_padded = 0;
  int64_t capacity = 0;
};

// Uniform random top-k (distinct experts per token), weights in (0, 1], then the alignment:
// slots grouped by expert in expert order, each run padded to BM with M*topk.
inline Routing make_routing(const MoeShape& s, int64_t M, int BM, uint64_t seed) {
  Routing r;
  Rng rng(seed);
  r.topk_ids.resize(M * s.topk);
  r.topk_weights.resize(M * s.topk);
  for (int64_t t = 0; t < M; ++t)
    for (int j = 0; j < s.topk; ++j) {
      int e;
      bool dup;
      do {
        e = static_cast<int>(rng.next() % s.E);
        dup = false;
        for (int q = 0; q < j; ++q) dup |= r.topk_ids[t * s.topk + q] == e;
      } while (dup);
      r.topk_ids[t * s.topk + j] = e;
      r.topk_weights[t * s.topk + j] = 0.05f + 0.95f * rng.uniform();
    }
  const int64_t slots = M * s.topk;
  std::vector<std::vector<int32_t>> by_expert(s.E);
  for (int64_t i = 0; i < slots; ++i) by_expert[r.topk_ids[i]].push_back(static_cast<int32_t>(i));
  r.capacity = slots + static_cast<int64_t>(s.E) * (BM - 1);
  r.capacity = (r.capacity + BM - 1) / BM * BM;
  r.sorted_token_ids.assign(r.capacity, static_cast<int32_t>(slots));
  r.expert_ids.assign(r.capacity / BM, -1);
  int64_t pos = 0;
  for (int e = 0; e < s.E; ++e) {
    if (by_expert[e].empty()) continue;
    const int64_t n = static_cast<int64_t>(by_expert[e].size());
    const int64_t padded = (n + BM - 1) / BM * BM;
    for (int64_t i = 0; i < n; ++i) r.sorted_token_ids[pos + i] = by_expert[e][i];
    for (int64_t b = 0; b < padded / BM; ++b) r.expert_ids[pos / BM + b] = e;
    pos += padded;
  }
  r.num_tokens_post_padded = static_cast<int32_t>(pos);
  return r;
}

// ---- weights and inputs of one shape -----------------------------------------------------------
inline bool block_fp8(const MoeShape& s) { return s.dtype == Dtype::fp8_w8a8 && s.block_shape.has_value(); }
// up and up_act (GEMM1 with SiLU(gate)·up fused) share w13, the input and the reduction.
inline bool up_like(GemmStage st) { return st != GemmStage::down; }
// Rows of the weight (w13: 2N, w2: K); the output has out_cols columns (N for up_act).
inline int n_out(const MoeShape& s, GemmStage st) { return up_like(st) ? 2 * s.N : s.K; }
inline int out_cols(const MoeShape& s, GemmStage st) { return st == GemmStage::up_act ? s.N : n_out(s, st); }
inline int k_red(const MoeShape& s, GemmStage st) { return up_like(st) ? s.K : s.N; }
inline int64_t a_rows(const MoeShape& s, GemmStage st, int64_t M) {
  return up_like(st) ? M : M * s.topk;
}

// Scales: block fp8 [rows, k/bk] or per-tensor [1]; weights [E, n/bn, k/bk] or [E]. Values in
// [2^-8, 2^-6] so products of the fp8 values (<= 16) stay small.
inline std::vector<float> random_scales(std::size_t n, uint64_t seed) {
  std::vector<float> v(n);
  Rng rng(seed);
  for (auto& x : v) x = std::ldexp(1.f + rng.uniform(), -8 + static_cast<int>(rng.next() % 2));
  return v;
}

struct HostWeights {
  std::vector<uint8_t> w;      // [E, n_out, k_red]
  std::vector<float> w_scale;  // block [E, n_out/bn, k_red/bk], per-tensor [E], else empty
};
inline HostWeights make_weights(const MoeShape& s, GemmStage st, uint64_t seed) {
  HostWeights h;
  const std::size_t n = static_cast<std::size_t>(s.E) * n_out(s, st) * k_red(s, st);
  fill_random(h.w, n, s.dtype, 1.f / std::sqrt(static_cast<float>(k_red(s, st))), seed);
  if (block_fp8(s)) {
    const auto [bn, bk] = *s.block_shape;
    h.w_scale = random_scales(static_cast<std::size_t>(s.E) * (n_out(s, st) / bn) * (k_red(s, st) / bk), seed + 7);
  } else if (s.dtype == Dtype::fp8_w8a8) {
    h.w_scale = random_scales(s.E, seed + 7);
  }
  return h;
}
struct HostInput {
  std::vector<uint8_t> a;      // [rows, k_red]
  std::vector<float> a_scale;  // block [rows, k_red/bk], per-tensor [1], else empty
};
inline HostInput make_input(const MoeShape& s, GemmStage st, int64_t M, uint64_t seed) {
  HostInput h;
  const int64_t rows = a_rows(s, st, M);
  fill_random(h.a, static_cast<std::size_t>(rows) * k_red(s, st), s.dtype, 1.f, seed);
  if (block_fp8(s)) h.a_scale = random_scales(static_cast<std::size_t>(rows) * (k_red(s, st) / (*s.block_shape)[1]), seed + 3);
  else if (s.dtype == Dtype::fp8_w8a8) h.a_scale = random_scales(1, seed + 3);
  return h;
}

template <class T>
inline cuda::DeviceBuffer upload(const std::vector<T>& v) {
  cuda::DeviceBuffer b(std::max<std::size_t>(v.size() * sizeof(T), 16));
  if (!v.empty()) b.upload(v.data(), v.size() * sizeof(T));
  return b;
}

// fp64 reference of one output row (slot) of the GEMM, dequantised exactly as the kernel's
// contract says; up_act: silu(gate) · up of the fp64 GEMM1 row (out_cols = N values).
inline void reference_row(const MoeShape& s, GemmStage st, const HostWeights& hw,
                          const HostInput& in, const Routing& r, int64_t slot,
                          std::vector<double>& row) {
  const int no = n_out(s, st), kr = k_red(s, st);
  const int e = r.topk_ids[slot];
  const int64_t arow = up_like(st) ? slot / s.topk : slot;
  row.assign(no, 0.0);
  std::vector<double> a(kr);
  for (int k = 0; k < kr; ++k) {
    double v = element(in.a, static_cast<std::size_t>(arow) * kr + k, s.dtype);
    if (block_fp8(s)) v *= in.a_scale[arow * (kr / (*s.block_shape)[1]) + k / (*s.block_shape)[1]];
    a[k] = v;
  }
  const double tensor_scale = (s.dtype == Dtype::fp8_w8a8 && !block_fp8(s))
                                  ? static_cast<double>(in.a_scale[0]) * hw.w_scale[e]
                                  : 1.0;
  for (int n = 0; n < no; ++n) {
    const std::size_t base = (static_cast<std::size_t>(e) * no + n) * kr;
    double acc = 0;
    if (block_fp8(s)) {
      const auto [bn, bk] = *s.block_shape;
      const float* ws = &hw.w_scale[(static_cast<std::size_t>(e) * (no / bn) + n / bn) * (kr / bk)];
      for (int g = 0; g < kr / bk; ++g) {
        double part = 0;
        for (int k = g * bk; k < (g + 1) * bk; ++k) part += a[k] * e4m3_to_float(hw.w[base + k]);
        acc += part * ws[g];
      }
    } else {
      for (int k = 0; k < kr; ++k) acc += a[k] * element(hw.w, base + k, s.dtype);
    }
    acc *= tensor_scale;
    if (st == GemmStage::down) acc *= r.topk_weights[slot];
    row[n] = acc;
  }
  if (st == GemmStage::up_act) {
    for (int c = 0; c < s.N; ++c) row[c] = row[c] / (1.0 + std::exp(-row[c])) * row[s.N + c];
    row.resize(s.N);
  }
}

}  // namespace moetune::gemm::testing
