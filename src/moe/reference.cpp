// fp64 CPU reference of the MoE layer: see reference.hpp.
#include "moe/reference.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <unordered_set>

#include "moe/parallel.hpp"
#include "moetune/error.hpp"

namespace moetune::moe {

// ---- number formats ----------------------------------------------------------------------------
float bf16_to_float(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

std::uint16_t float_to_bf16(float x) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

float fp16_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const int exp = (h >> 10) & 0x1f;
  const std::uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(man), -24);
    return sign ? -v : v;
  }
  return std::bit_cast<float>(sign | (static_cast<std::uint32_t>(exp - 15 + 127) << 23) |
                              (man << 13));
}

std::uint16_t float_to_fp16(float x) {
  const std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(x));
  if (std::isnan(x)) return 0x7e00;
  if (a >= 65520.0) return sign | 0x7c00;  // rounds to inf
  if (a < std::ldexp(1.0, -14)) {           // subnormal: quantum 2^-24
    const double q = std::nearbyint(a * std::ldexp(1.0, 24));
    return sign | static_cast<std::uint16_t>(q);  // q == 1024 gives the smallest normal
  }
  int e = 0;
  std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1)
  const int exp = e - 1;
  double q = std::nearbyint(a * std::ldexp(1.0, 10 - exp));  // in [1024, 2048]
  int biased = exp + 15;
  if (q >= 2048) {
    q /= 2;
    ++biased;
  }
  if (biased >= 31) return sign | 0x7c00;
  return sign | static_cast<std::uint16_t>((biased << 10) | (static_cast<int>(q) - 1024));
}

double e4m3_to_double(std::uint8_t bits) {
  const double sign = (bits & 0x80) ? -1.0 : 1.0;
  const int exp = (bits >> 3) & 0xf;
  const int man = bits & 0x7;
  if (exp == 0xf && man == 0x7) return std::numeric_limits<double>::quiet_NaN();
  if (exp == 0) return sign * std::ldexp(static_cast<double>(man), -9);
  return sign * std::ldexp(1.0 + man / 8.0, exp - 7);
}

double round_e4m3(double x) {
  if (std::isnan(x)) return x;
  const double a = std::fabs(x);
  double q;
  if (a < std::ldexp(1.0, -6)) {
    q = std::nearbyint(a * 512.0) / 512.0;  // subnormal quantum 2^-9
  } else {
    int e = 0;
    std::frexp(a, &e);
    const double quantum = std::ldexp(1.0, e - 1 - 3);
    q = std::nearbyint(a / quantum) * quantum;
  }
  q = std::min(q, kFp8Max);
  return std::copysign(q, x);
}

std::uint8_t double_to_e4m3(double x) {
  if (std::isnan(x)) return 0x7f;
  const double q = round_e4m3(x);
  const std::uint8_t sign = std::signbit(q) ? 0x80 : 0;
  const double a = std::fabs(q);
  if (a < std::ldexp(1.0, -6)) return sign | static_cast<std::uint8_t>(std::lround(a * 512.0));
  int e = 0;
  std::frexp(a, &e);
  const int exp = e - 1;
  const int man = static_cast<int>(std::lround((a / std::ldexp(1.0, exp) - 1.0) * 8.0));
  return sign | static_cast<std::uint8_t>(((exp + 7) << 3) | man);
}

double half_bits_to_double(Dtype dtype, std::uint16_t bits) {
  return dtype == Dtype::fp16 ? fp16_to_float(bits) : bf16_to_float(bits);
}

std::uint16_t double_to_half_bits(Dtype dtype, double x) {
  return dtype == Dtype::fp16 ? float_to_fp16(static_cast<float>(x))
                              : float_to_bf16(static_cast<float>(x));
}

Dtype activation_dtype(Dtype weight_dtype) {
  return weight_dtype == Dtype::fp16 ? Dtype::fp16 : Dtype::bf16;
}

// ---- routing -----------------------------------------------------------------------------------
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Indices of the k largest values (ties: smaller index first; NaN as -inf, as the routing
// kernel: also a strict weak order for the sort), in descending order.
std::vector<int> top_indices(const std::vector<double>& v, int k) {
  std::vector<int> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  auto key = [&](int i) { return std::isnan(v[i]) ? kNegInf : v[i]; };
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return key(a) > key(b); });
  idx.resize(std::min<std::size_t>(k, idx.size()));
  return idx;
}

// The largest of [first, last) with NaN as -inf (as the routing kernel: NaN never wins a max).
double max_skipping_nan(const double* first, const double* last) {
  double m = kNegInf;
  for (const double* p = first; p != last; ++p)
    if (*p > m) m = *p;
  return m;
}

void check_routing(int E_global, int topk, const Routing& r) {
  if (E_global <= 0) throw InputError("E_global", std::to_string(E_global), "must be positive");
  if (topk <= 0 || topk > E_global)
    throw InputError("topk", std::to_string(topk), "must be in [1, E_global]");
  if (r.n_group < 1 || E_global % r.n_group != 0)
    throw InputError("n_group", std::to_string(r.n_group), "must divide the expert count");
  if (r.n_group > 1 && (r.topk_group < 1 || r.topk_group > r.n_group))
    throw InputError("topk_group", std::to_string(r.topk_group), "must be in [1, n_group]");
  if (r.scoring != "softmax" && r.scoring != "sigmoid")
    throw InputError("scoring", r.scoring, "must be softmax or sigmoid");
}

std::vector<double> scores_of(const float* logits, int E_global, const Routing& r) {
  std::vector<double> s(E_global);
  if (r.scoring == "sigmoid") {
    for (int e = 0; e < E_global; ++e) s[e] = 1.0 / (1.0 + std::exp(-double(logits[e])));
  } else {
    double mx = kNegInf;
    for (int e = 0; e < E_global; ++e) mx = std::max(mx, double(logits[e]));
    double sum = 0;
    for (int e = 0; e < E_global; ++e) sum += s[e] = std::exp(double(logits[e]) - mx);
    for (double& v : s) v /= sum;
  }
  return s;
}

std::vector<double> weights_from(const std::vector<double>& s, const std::int32_t* ids, int topk,
                                 const Routing& r) {
  std::vector<double> w(topk);
  double sum = 0;
  for (int j = 0; j < topk; ++j) sum += w[j] = s[ids[j]];
  for (double& v : w) {
    if (r.renormalize) v /= sum;
    v *= r.routed_scaling_factor;
  }
  return w;
}

}  // namespace

RoutingResult route_reference(const float* router_logits, int M, int E_global, int topk,
                              const Routing& routing, const float* correction_bias) {
  check_routing(E_global, topk, routing);
  RoutingResult out;
  out.topk_ids.resize(std::size_t(M) * topk);
  out.topk_weights.resize(std::size_t(M) * topk);
  out.choice.resize(std::size_t(M) * E_global);
  out.choice_unmasked.resize(std::size_t(M) * E_global);
  if (routing.n_group > 1) out.group_score.resize(std::size_t(M) * routing.n_group);
  const bool bias = routing.correction_bias && correction_bias != nullptr;
  for (int t = 0; t < M; ++t) {
    const float* row = router_logits + std::size_t(t) * E_global;
    const std::vector<double> s = scores_of(row, E_global, routing);
    std::vector<double> c(s);
    if (bias)
      for (int e = 0; e < E_global; ++e) c[e] += correction_bias[e];
    std::copy(c.begin(), c.end(), out.choice_unmasked.begin() + std::size_t(t) * E_global);
    if (routing.n_group > 1) {
      const int gsize = E_global / routing.n_group;
      std::vector<double> gscore(routing.n_group);
      for (int g = 0; g < routing.n_group; ++g) {
        std::vector<double> grp(c.begin() + g * gsize, c.begin() + (g + 1) * gsize);
        if (bias) {
          const std::vector<int> top2 = top_indices(grp, 2);
          gscore[g] = 0;
          for (int i : top2) gscore[g] += grp[i];
        } else {
          gscore[g] = max_skipping_nan(grp.data(), grp.data() + grp.size());
        }
        if (std::isnan(gscore[g])) gscore[g] = kNegInf;  // inf + -inf: a loser, as in the kernel
      }
      std::copy(gscore.begin(), gscore.end(),
                out.group_score.begin() + std::size_t(t) * routing.n_group);
      const std::vector<int> keep = top_indices(gscore, routing.topk_group);
      std::vector<bool> kept(routing.n_group, false);
      for (int g : keep) kept[g] = true;
      for (int e = 0; e < E_global; ++e)
        if (!kept[e / gsize]) c[e] = kNegInf;
    }
    const std::vector<int> sel = top_indices(c, topk);
    for (int j = 0; j < topk; ++j) out.topk_ids[std::size_t(t) * topk + j] = sel[j];
    const std::vector<double> w =
        weights_from(s, out.topk_ids.data() + std::size_t(t) * topk, topk, routing);
    std::copy(w.begin(), w.end(), out.topk_weights.begin() + std::size_t(t) * topk);
    std::copy(c.begin(), c.end(), out.choice.begin() + std::size_t(t) * E_global);
  }
  return out;
}

bool routing_near_tie(const RoutingResult& ref, std::int64_t t, const std::int32_t* ids,
                      int E_global, int topk, const Routing& routing, double rel_tol) {
  auto tol = [&](double v) { return rel_tol * (1 + std::fabs(v)); };
  const std::size_t row = std::size_t(t) * E_global;
  // The picks are a top-k of `c` over the experts `eligible` admits, up to near-ties: none below
  // the k-th value by more than the tolerance, and none missing that is above it by more.
  auto top_k_up_to_ties = [&](const double* c, auto&& eligible) {
    std::vector<double> pool;
    for (int e = 0; e < E_global; ++e)
      if (eligible(e) && std::isfinite(c[e])) pool.push_back(c[e]);
    if (static_cast<int>(pool.size()) < topk) return false;
    std::nth_element(pool.begin(), pool.begin() + (topk - 1), pool.end(), std::greater<>());
    const double kth = pool[topk - 1];
    std::vector<bool> picked(E_global, false);
    for (int j = 0; j < topk; ++j) {
      if (!eligible(ids[j]) || !std::isfinite(c[ids[j]]) || c[ids[j]] < kth - tol(kth))
        return false;
      picked[ids[j]] = true;
    }
    for (int e = 0; e < E_global; ++e)
      if (eligible(e) && !picked[e] && c[e] > kth + tol(kth)) return false;
    return true;
  };
  // Among the reference's eligible experts (its kept groups).
  const double* masked = ref.choice.data() + row;
  if (top_k_up_to_ties(masked, [&](int e) { return std::isfinite(masked[e]); })) return true;
  if (routing.n_group <= 1) return false;
  // A near-tie between groups: the kept groups are every group clearly above the
  // topk_group-th best score, plus near-tied ones, among them those the picks come from.
  const int gsize = E_global / routing.n_group;
  const double* gs = ref.group_score.data() + std::size_t(t) * routing.n_group;
  std::vector<double> sorted(gs, gs + routing.n_group);
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  const double gth = sorted[routing.topk_group - 1];
  // Groups scoring +-inf tie exactly, and exact ties go to the smaller id: no leniency there.
  if (!std::isfinite(gth)) return false;
  std::vector<bool> kept(routing.n_group, false);
  for (int g = 0; g < routing.n_group; ++g) kept[g] = gs[g] > gth + tol(gth);
  for (int j = 0; j < topk; ++j) {
    const int g = ids[j] / gsize;
    if (gs[g] < gth - tol(gth)) return false;  // a group no near-tie keeps
    kept[g] = true;
  }
  if (std::count(kept.begin(), kept.end(), true) > routing.topk_group) return false;
  // The kernel kept topk_group groups: fill up with the near-tied groups least able to hold an
  // expert the picks should have beaten (the lowest best choice first), the most lenient reading
  // that is still a selection some resolution of the near-ties makes.
  const double* cu = ref.choice_unmasked.data() + row;
  auto best_of = [&](int g) { return max_skipping_nan(cu + g * gsize, cu + (g + 1) * gsize); };
  std::vector<int> fill;
  for (int g = 0; g < routing.n_group; ++g)
    if (!kept[g] && gs[g] >= gth - tol(gth)) fill.push_back(g);
  std::sort(fill.begin(), fill.end(), [&](int a, int b) { return best_of(a) < best_of(b); });
  for (int g : fill) {
    if (std::count(kept.begin(), kept.end(), true) >= routing.topk_group) break;
    kept[g] = true;
  }
  return top_k_up_to_ties(cu, [&](int e) { return static_cast<bool>(kept[e / gsize]); });
}

std::vector<double> routing_weights_for(const float* logits_row, int E_global,
                                        const std::int32_t* ids, int topk,
                                        const Routing& routing) {
  check_routing(E_global, topk, routing);
  for (int j = 0; j < topk; ++j)
    if (ids[j] < 0 || ids[j] >= E_global)
      throw InputError("topk_ids", std::to_string(ids[j]), "outside [0, E_global)");
  return weights_from(scores_of(logits_row, E_global, routing), ids, topk, routing);
}

// ---- alignment ---------------------------------------------------------------------------------
std::int64_t max_num_tokens_padded(std::int64_t M, int topk, int E, int BLOCK_SIZE_M) {
  const std::int64_t slots = M * topk;
  const std::int64_t n = slots + std::min<std::int64_t>(E, slots) * (BLOCK_SIZE_M - 1);
  return (n + BLOCK_SIZE_M - 1) / BLOCK_SIZE_M * BLOCK_SIZE_M;
}

std::int64_t max_num_m_blocks(std::int64_t M, int topk, int E, int BLOCK_SIZE_M) {
  return max_num_tokens_padded(M, topk, E, BLOCK_SIZE_M) / BLOCK_SIZE_M;
}

Alignment align_reference(const std::int32_t* topk_ids, std::int64_t M, int topk, int E, int rank,
                          int BLOCK_SIZE_M) {
  if (BLOCK_SIZE_M <= 0)
    throw InputError("BLOCK_SIZE_M", std::to_string(BLOCK_SIZE_M), "must be positive");
  const std::int64_t slots = M * topk;
  const std::int64_t start = std::int64_t(rank) * E;
  std::vector<std::vector<std::int32_t>> per_expert(E);
  for (std::int64_t i = 0; i < slots; ++i) {
    const std::int64_t e = topk_ids[i] - start;
    if (e >= 0 && e < E) per_expert[e].push_back(static_cast<std::int32_t>(i));
  }
  Alignment a;
  a.sorted_token_ids.assign(max_num_tokens_padded(M, topk, E, BLOCK_SIZE_M),
                            static_cast<std::int32_t>(slots));
  a.expert_ids.assign(max_num_m_blocks(M, topk, E, BLOCK_SIZE_M), -1);
  std::int64_t pos = 0;
  for (int e = 0; e < E; ++e) {
    const std::int64_t n = static_cast<std::int64_t>(per_expert[e].size());
    const std::int64_t blocks = (n + BLOCK_SIZE_M - 1) / BLOCK_SIZE_M;
    for (std::int64_t i = 0; i < n; ++i) a.sorted_token_ids[pos + i] = per_expert[e][i];
    for (std::int64_t b = 0; b < blocks; ++b) a.expert_ids[pos / BLOCK_SIZE_M + b] = e;
    pos += blocks * BLOCK_SIZE_M;
  }
  a.num_tokens_post_padded = static_cast<std::int32_t>(pos);
  return a;
}

std::string compare_alignment(const Alignment& got, const Alignment& ref, std::int64_t M,
                              int topk) {
  if (got.num_tokens_post_padded != ref.num_tokens_post_padded)
    return "num_tokens_post_padded " + std::to_string(got.num_tokens_post_padded) + " != " +
           std::to_string(ref.num_tokens_post_padded);
  const std::int64_t total = ref.num_tokens_post_padded;
  if (ref.expert_ids.empty() || total == 0) return "";
  const std::int64_t bm = total / std::max<std::int64_t>(
                                      1, std::count_if(ref.expert_ids.begin(), ref.expert_ids.end(),
                                                       [](std::int32_t e) { return e >= 0; }));
  const std::int64_t blocks = total / bm;
  if (std::int64_t(got.expert_ids.size()) < blocks ||
      std::int64_t(got.sorted_token_ids.size()) < total)
    return "outputs shorter than num_tokens_post_padded";
  for (std::int64_t b = 0; b < std::int64_t(ref.expert_ids.size()); ++b) {
    const std::int32_t g = b < std::int64_t(got.expert_ids.size()) ? got.expert_ids[b] : -1;
    if (g != ref.expert_ids[b])
      return "expert_ids[" + std::to_string(b) + "] " + std::to_string(g) +
             " != " + std::to_string(ref.expert_ids[b]);
  }
  // Each expert's range holds the same slots (any order); the sentinel M*topk pads.
  std::int64_t b = 0;
  while (b < blocks) {
    std::int64_t e_end = b;
    while (e_end < blocks && ref.expert_ids[e_end] == ref.expert_ids[b]) ++e_end;
    std::vector<std::int32_t> g(got.sorted_token_ids.begin() + b * bm,
                                got.sorted_token_ids.begin() + e_end * bm);
    std::vector<std::int32_t> r(ref.sorted_token_ids.begin() + b * bm,
                                ref.sorted_token_ids.begin() + e_end * bm);
    std::sort(g.begin(), g.end());
    std::sort(r.begin(), r.end());
    if (g != r)
      return "sorted_token_ids of expert " + std::to_string(ref.expert_ids[b]) +
             " differ (blocks " + std::to_string(b) + ".." + std::to_string(e_end - 1) + ")";
    b = e_end;
  }
  (void)M;
  (void)topk;
  return "";
}

// ---- quantization ------------------------------------------------------------------------------
double fp32_quotient(double x, double scale) {
  return static_cast<double>(static_cast<float>(x) / static_cast<float>(scale));
}

void quant_fp8_group_reference(const double* x, std::int64_t rows, int cols, int group,
                               double* deq, double* scale) {
  if (group <= 0 || cols % group != 0)
    throw InputError("block_k", std::to_string(group), "must divide the row length");
  const int groups = cols / group;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (int g = 0; g < groups; ++g) {
      const double* xs = x + r * cols + std::int64_t(g) * group;
      double amax = 0;
      for (int i = 0; i < group; ++i) amax = std::max(amax, std::fabs(xs[i]));
      // The kernel computes in fp32: scale = max(amax, 1e-10) / 448 rounded to fp32.
      const double s = static_cast<float>(std::max(amax, 1e-10) / kFp8Max);
      scale[r * groups + g] = s;
      for (int i = 0; i < group; ++i)
        deq[r * cols + std::int64_t(g) * group + i] = round_e4m3(fp32_quotient(xs[i], s)) * s;
    }
  }
}

double quant_fp8_tensor_reference(const double* x, std::int64_t n, double* deq) {
  double amax = 0;
  for (std::int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  const double s = static_cast<float>(std::max(amax, 1e-10) / kFp8Max);
  for (std::int64_t i = 0; i < n; ++i) deq[i] = round_e4m3(fp32_quotient(x[i], s)) * s;
  return s;
}

// ---- activation --------------------------------------------------------------------------------
double silu(double x) { return x / (1.0 + std::exp(-x)); }

void silu_mul_reference(const double* h, std::int64_t rows, int N, double* out) {
  for (std::int64_t r = 0; r < rows; ++r)
    for (int n = 0; n < N; ++n)
      out[r * N + n] = silu(h[r * 2 * N + n]) * h[r * 2 * N + N + n];
}

// ---- weights -----------------------------------------------------------------------------------
namespace {

const double* e4m3_table() {
  static const std::vector<double> table = [] {
    std::vector<double> t(256);
    for (int i = 0; i < 256; ++i) t[i] = e4m3_to_double(static_cast<std::uint8_t>(i));
    return t;
  }();
  return table.data();
}

// Dequantizes row `row` of a [E, R, C] weight (one expert, one output row) into dst[C].
void weight_row(const MoeShape& shape, const HostWeights& w, bool is_w13, int e, int row,
                double* dst) {
  const std::int64_t R = is_w13 ? 2LL * shape.N : shape.K;
  const std::int64_t C = is_w13 ? shape.K : shape.N;
  const std::int64_t base = (std::int64_t(e) * R + row) * C;
  const void* data = is_w13 ? w.w13 : w.w2;
  const float* scale = is_w13 ? w.w13_scale : w.w2_scale;
  if (w.dtype != Dtype::fp8_w8a8) {
    const auto* p = static_cast<const std::uint16_t*>(data) + base;
    for (std::int64_t c = 0; c < C; ++c) dst[c] = half_bits_to_double(w.dtype, p[c]);
    return;
  }
  const double* lut = e4m3_table();
  const auto* p = static_cast<const std::uint8_t*>(data) + base;
  if (w.block_shape) {
    const int bn = (*w.block_shape)[0], bk = (*w.block_shape)[1];
    const std::int64_t rb = (R + bn - 1) / bn, cb = (C + bk - 1) / bk;
    const float* srow = scale + (std::int64_t(e) * rb + row / bn) * cb;
    for (std::int64_t c = 0; c < C; ++c) dst[c] = lut[p[c]] * srow[c / bk];
  } else {
    const double s = scale[e];
    for (std::int64_t c = 0; c < C; ++c) dst[c] = lut[p[c]] * s;
  }
}

double dot(const double* a, const double* b, std::int64_t n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  std::int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += a[i] * b[i];
    s1 += a[i + 1] * b[i + 1];
    s2 += a[i + 2] * b[i + 2];
    s3 += a[i + 3] * b[i + 3];
  }
  for (; i < n; ++i) s0 += a[i] * b[i];
  return (s0 + s1) + (s2 + s3);
}

}  // namespace

void w13_row(const MoeShape& shape, const HostWeights& w, int e, int n, double* dst) {
  weight_row(shape, w, true, e, n, dst);
}

void w2_row(const MoeShape& shape, const HostWeights& w, int e, int k, double* dst) {
  weight_row(shape, w, false, e, k, dst);
}

double w13_at(const MoeShape& shape, const HostWeights& w, int e, int n, int k) {
  std::vector<double> row(shape.K);
  weight_row(shape, w, true, e, n, row.data());
  return row[k];
}

double w2_at(const MoeShape& shape, const HostWeights& w, int e, int k, int n) {
  std::vector<double> row(shape.N);
  weight_row(shape, w, false, e, k, row.data());
  return row[n];
}

// ---- the layer ---------------------------------------------------------------------------------
std::vector<double> layer_reference(const MoeShape& shape, const HostWeights& w, std::int64_t M,
                                    const std::uint16_t* hidden, const std::int32_t* topk_ids,
                                    const float* topk_weights,
                                    const std::vector<std::int64_t>& rows,
                                    const LayerReferenceOptions& opts) {
  const int N = shape.N, K = shape.K, topk = shape.topk, E = shape.E;
  const bool fp8 = w.dtype == Dtype::fp8_w8a8;
  const bool block = fp8 && w.block_shape.has_value();
  const int bk = block ? (*w.block_shape)[1] : 0;
  if (block && (K % bk != 0 || N % bk != 0))
    throw InputError("block_shape", std::to_string(bk), "must divide N and K");
  const Dtype act = activation_dtype(w.dtype);
  const std::int64_t start = std::int64_t(opts.rank) * E;

  // Per-tensor fp8: the hidden scale is over all M rows.
  double x_scale = 0;
  if (fp8 && !block) {
    double amax = 0;
    for (std::int64_t i = 0; i < M * K; ++i)
      amax = std::max(amax, std::fabs(half_bits_to_double(act, hidden[i])));
    x_scale = static_cast<float>(std::max(amax, 1e-10) / kFp8Max);
  }

  // Pass 1 per row: x (quantized), then per local slot the activation silu(gate)*up.
  const std::int64_t R = static_cast<std::int64_t>(rows.size());
  std::vector<double> acts(R * topk * N, 0.0);
  std::vector<char> local(R * topk, 0);
  parallel_for(R, opts.threads, [&](std::int64_t r) {
    const std::int64_t t = rows[r];
    std::vector<double> x(K), xq(K), wrow(K), h(2 * N);
    for (int k = 0; k < K; ++k) x[k] = half_bits_to_double(act, hidden[t * K + k]);
    if (block) {
      std::vector<double> sc(K / bk);
      quant_fp8_group_reference(x.data(), 1, K, bk, xq.data(), sc.data());
    } else if (fp8) {
      for (int k = 0; k < K; ++k) xq[k] = round_e4m3(fp32_quotient(x[k], x_scale)) * x_scale;
    } else {
      xq = x;
    }
    for (int j = 0; j < topk; ++j) {
      const std::int64_t e = topk_ids[t * topk + j] - start;
      if (e < 0 || e >= E) continue;
      local[r * topk + j] = 1;
      for (int n = 0; n < 2 * N; ++n) {
        weight_row(shape, w, true, static_cast<int>(e), n, wrow.data());
        h[n] = dot(xq.data(), wrow.data(), K);
        // fp8: the kernels quantize the activation from GEMM1's 16-bit output and the 16-bit
        // SiLU·up; the reference rounds the same way so that its fp8 rounding decisions match.
        if (fp8) h[n] = half_bits_to_double(act, double_to_half_bits(act, h[n]));
      }
      double* a = acts.data() + (r * topk + j) * N;
      silu_mul_reference(h.data(), 1, N, a);
      if (fp8)
        for (int n = 0; n < N; ++n) a[n] = half_bits_to_double(act, double_to_half_bits(act, a[n]));
    }
  });

  // The activation's quantization.
  if (block) {
    std::vector<double> tmp(N), sc(N / bk);
    for (std::int64_t s = 0; s < R * topk; ++s) {
      if (!local[s]) continue;
      quant_fp8_group_reference(acts.data() + s * N, 1, N, bk, tmp.data(), sc.data());
      std::copy(tmp.begin(), tmp.end(), acts.begin() + s * N);
    }
  } else if (fp8) {
    double a_scale = 0;
    if (opts.act_scale_override) {
      a_scale = *opts.act_scale_override;
    } else {
      double amax = 0;
      for (double v : acts) amax = std::max(amax, std::fabs(v));
      a_scale = static_cast<float>(std::max(amax, 1e-10) / kFp8Max);
    }
    for (double& v : acts) v = round_e4m3(fp32_quotient(v, a_scale)) * a_scale;
  }

  // Pass 2: GEMM2 and the weighted sum over topk.
  std::vector<double> out(R * K, 0.0);
  parallel_for(R, opts.threads, [&](std::int64_t r) {
    const std::int64_t t = rows[r];
    std::vector<double> wrow(N);
    for (int j = 0; j < topk; ++j) {
      if (!local[r * topk + j]) continue;
      const int e = static_cast<int>(topk_ids[t * topk + j] - start);
      const double wt = topk_weights[t * topk + j];
      const double* a = acts.data() + (r * topk + j) * N;
      for (int k = 0; k < K; ++k) {
        weight_row(shape, w, false, e, k, wrow.data());
        out[r * K + k] += wt * dot(a, wrow.data(), N);
      }
    }
  });
  return out;
}

std::vector<std::int64_t> sample_rows(std::int64_t M, std::int64_t max_rows, std::uint64_t seed) {
  std::vector<std::int64_t> rows;
  if (M <= max_rows) {
    rows.resize(M);
    std::iota(rows.begin(), rows.end(), 0);
    return rows;
  }
  std::mt19937_64 rng(seed);
  std::unordered_set<std::int64_t> seen;
  std::uniform_int_distribution<std::int64_t> dist(0, M - 1);
  while (std::int64_t(seen.size()) < max_rows) seen.insert(dist(rng));
  rows.assign(seen.begin(), seen.end());
  std::sort(rows.begin(), rows.end());
  return rows;
}

double rel_error(const std::vector<double>& got, const std::vector<double>& ref) {
  if (got.size() != ref.size()) return std::numeric_limits<double>::quiet_NaN();
  double num = 0, den = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return std::numeric_limits<double>::quiet_NaN();
    const double d = got[i] - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  if (den == 0) return num == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return std::sqrt(num / den);
}

}  // namespace moetune::moe
