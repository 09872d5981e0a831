// `moetune check` as a library: see check.hpp.
#include "moe/check.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cuda/context.hpp"
#include "cuda/device.hpp"
#include "cuda/driver.hpp"
#include "gemm/gemm.hpp"
#include "moe/decode.hpp"
#include "moe/persistent.hpp"
#include "moe/sliced.hpp"
#include "moe/parallel.hpp"
#include "moe/reference.hpp"
#include "moe/stages.hpp"
#include "perf/splitmix64.hpp"
#include "moetune/error.hpp"
#include "moetune/fused_moe.hpp"
#include "moetune/model.hpp"

namespace moetune::moe {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

using Rng = SplitMix64;

bool is_fp8(const MoeShape& s) { return s.dtype == Dtype::fp8_w8a8; }
bool is_block(const MoeShape& s) { return is_fp8(s) && s.block_shape.has_value(); }

// Random weights in storage format, with scales, on the host.
struct HostWeightData {
  std::vector<std::uint16_t> w13_16, w2_16;
  std::vector<std::uint8_t> w13_8, w2_8;
  std::vector<float> w13_scale, w2_scale;
  HostWeights view(const MoeShape& s) const {
    HostWeights w;
    w.dtype = s.dtype;
    w.block_shape = s.block_shape;
    if (is_fp8(s)) {
      w.w13 = w13_8.data();
      w.w2 = w2_8.data();
      w.w13_scale = w13_scale.data();
      w.w2_scale = w2_scale.data();
    } else {
      w.w13 = w13_16.data();
      w.w2 = w2_16.data();
    }
    return w;
  }
};

// Weights ~ N(0, 1/reduction) so that every stage's output is O(1). fp8: e4m3 codes of
// N(0, 1) * 64 with a scale of 1/(64 sqrt(reduction)), jittered per block/expert (0.5x..1.5x) so
// that a wrong scale index shows.
HostWeightData make_weights(const MoeShape& s, std::uint64_t seed) {
  HostWeightData d;
  const std::int64_t n13 = std::int64_t(s.E) * 2 * s.N * s.K, n2 = std::int64_t(s.E) * s.K * s.N;
  const double sd13 = 1.0 / std::sqrt(double(s.K)), sd2 = 1.0 / std::sqrt(double(s.N));
  auto fill16 = [&](std::vector<std::uint16_t>& v, std::int64_t n, double sd, std::uint64_t sd_seed) {
    v.resize(n);
    const Dtype act = activation_dtype(s.dtype);
    parallel_chunks(n, kSeedChunks, [&](std::int64_t lo, std::int64_t hi, std::uint64_t t) {
      Rng r{sd_seed * 1000003 + t * 7919 + 17};
      for (std::int64_t i = lo; i < hi; ++i) v[i] = double_to_half_bits(act, r.normal() * sd);
    });
  };
  auto fill8 = [&](std::vector<std::uint8_t>& v, std::int64_t n, std::uint64_t sd_seed) {
    v.resize(n);
    parallel_chunks(n, kSeedChunks, [&](std::int64_t lo, std::int64_t hi, std::uint64_t t) {
      Rng r{sd_seed * 1000003 + t * 7919 + 29};
      for (std::int64_t i = lo; i < hi; ++i) v[i] = double_to_e4m3(r.normal() * 64.0);
    });
  };
  if (!is_fp8(s)) {
    fill16(d.w13_16, n13, sd13, seed + 1);
    fill16(d.w2_16, n2, sd2, seed + 2);
    return d;
  }
  fill8(d.w13_8, n13, seed + 1);
  fill8(d.w2_8, n2, seed + 2);
  Rng r{seed + 3};
  auto scales = [&](std::vector<float>& v, std::int64_t n, double sd) {
    v.resize(n);
    for (auto& x : v) x = static_cast<float>(sd / 64.0 * (0.5 + r.uniform()));
  };
  if (is_block(s)) {
    const int bn = (*s.block_shape)[0], bk = (*s.block_shape)[1];
    scales(d.w13_scale, std::int64_t(s.E) * (2 * s.N / bn) * (s.K / bk), sd13);
    scales(d.w2_scale, std::int64_t(s.E) * (s.K / bn) * (s.N / bk), sd2);
  } else {
    scales(d.w13_scale, s.E, sd13);
    scales(d.w2_scale, s.E, sd2);
  }
  return d;
}

struct DeviceWeights {
  cuda::DeviceBuffer w13, w2, w13_scale, w2_scale, bias;
  MoeWeights view() const {
    MoeWeights w;
    w.w13 = reinterpret_cast<const void*>(w13.ptr());
    w.w2 = reinterpret_cast<const void*>(w2.ptr());
    w.w13_scale = w13_scale.empty() ? nullptr : w13_scale.as<const float>();
    w.w2_scale = w2_scale.empty() ? nullptr : w2_scale.as<const float>();
    w.correction_bias = bias.empty() ? nullptr : bias.as<const float>();
    return w;
  }
};

std::string config_text(const KernelConfig& up, const KernelConfig& down) {
  return fmt::format("up {} down {}", to_json(up).dump(), to_json(down).dump());
}

template <typename T>
std::vector<T> download(const cuda::DeviceBuffer& b, std::size_t offset, std::size_t count) {
  std::vector<T> v(count);
  if (count > 0) b.download(v.data(), count * sizeof(T), offset);
  return v;
}

// Dequantized activation row r of an fp8 tensor with its scales.
double deq(const std::vector<std::uint8_t>& q, const std::vector<float>& scale, std::int64_t r,
           int cols, int c, int bk) {
  const double v = e4m3_to_double(q[r * cols + c]);
  return bk > 0 ? v * scale[r * (cols / bk) + c / bk] : v * scale[0];
}

// Everything one case produced on the GPU, on the host.
struct GpuCase {
  std::vector<std::int32_t> topk_ids;
  std::vector<float> topk_weights;
  Alignment align;
  std::vector<std::uint8_t> a_q, act_q;
  std::vector<float> a_scale, act_scale;
  std::vector<std::uint16_t> h, act, y, out;
};

}  // namespace

int CheckReport::failures() const {
  return static_cast<int>(
      std::count_if(results.begin(), results.end(), [](const CheckResult& r) { return !r.ok; }));
}

// Built from the embedded presets, so `check` tests exactly what `--model <preset>` gives a user
// (one source for E, N, K, topk and routing).
std::vector<CheckShape> anchor_check_shapes() {
  auto preset = [](const char* name, int tp) {
    ModelOptions o;
    o.tp = tp;
    return load_model(name, o);
  };
  return {{"qwen3.5-122b tp4", preset("qwen3.5-122b-a10b", 4), 0},
          {"deepseek-v3 tp8", preset("deepseek-v3", 8), 0},
          {"mixtral-8x7b tp2", preset("mixtral-8x7b", 2), 0}};
}

MoeShape with_dtype_variant(const MoeShape& shape, const std::string& variant) {
  MoeShape s = shape;
  s.block_shape.reset();
  if (variant == "bf16") {
    s.dtype = Dtype::bf16;
  } else if (variant == "fp16") {
    s.dtype = Dtype::fp16;
  } else if (variant == "fp8_block") {
    s.dtype = Dtype::fp8_w8a8;
    s.block_shape = std::array<int, 2>{128, 128};
  } else if (variant == "fp8_tensor") {
    s.dtype = Dtype::fp8_w8a8;
  } else {
    throw InputError("dtype", variant, "check dtypes are bf16, fp16, fp8_block, fp8_tensor");
  }
  return s;
}

double error_threshold(const MoeShape& shape) { return is_fp8(shape) ? 5e-2 : 1e-2; }

std::pair<KernelConfig, KernelConfig> random_valid_configs(const MoeShape& shape,
                                                           const GpuSpec& gpu,
                                                           const std::string& arch,
                                                           std::uint64_t seed) {
  static const int bm[] = {16, 32, 64, 128, 256}, bn[] = {32, 64, 128, 256},
                   bk[] = {64, 128, 256}, gm[] = {1, 16, 32, 64}, nw[] = {4, 8},
                   ns[] = {2, 3, 4, 5}, sk[] = {1, 1, 2, 4}, swap[] = {0, 0, 1};
  std::mt19937_64 rng(seed);
  auto pick = [&](const auto& arr) { return arr[rng() % std::size(arr)]; };
  ValidationTarget target;
  target.dtype = shape.dtype;
  target.block_shape = shape.block_shape;
  target.gpu = &gpu;
  auto valid = [&](const KernelConfig& c, gemm::GemmStage st) {
    if (!validate_config(c, target, 1).empty()) return false;
    try {
      (void)gemm::gemm_kernel_spec(shape, c, st, arch);
    } catch (const InputError&) {
      return false;
    }
    return true;
  };
  // up: valid for the fused GEMM1 too where the layer would fuse it at small M (its rules
  // include the unfused one's): the layer may run either, depending on M (gemm::gemm1_stage).
  auto draw = [&](int BM, bool up) {
    for (int tries = 0; tries < 5000; ++tries) {
      KernelConfig c{BM > 0 ? BM : pick(bm), pick(bn), pick(bk), pick(gm), pick(nw), pick(ns),
                     pick(sk), pick(swap)};
      if (!up && valid(c, gemm::GemmStage::down)) return c;
      if (up && valid(c, gemm::GemmStage::up) &&
          (gemm::gemm1_stage(shape, 1, c) != gemm::GemmStage::up_act ||
           valid(c, gemm::GemmStage::up_act)))
        return c;
    }
    throw InputError("config", "random", "no valid config found in 5000 draws");
  };
  const KernelConfig up = draw(0, true);
  const KernelConfig down = draw(up.BLOCK_SIZE_M, false);
  return {up, down};
}

CheckReport check_shape(const CheckShape& cs, const GpuSpec& gpu, const CheckOptions& opts,
                        const CheckCallback& on_result) {
  const auto t0 = std::chrono::steady_clock::now();
  CheckReport report;
  report.seed = opts.seed != 0 ? opts.seed : std::random_device{}() | 1ULL;
  const std::string arch = opts.arch.empty() ? gpu.arch() : opts.arch;
  cuda::Context& ctx = cuda::Context::current();
  (void)ctx;
  cuda::Stream stream;
  std::uint64_t case_seed = report.seed;

  for (const std::string& variant : opts.dtypes) {
    const MoeShape s = with_dtype_variant(cs.shape, variant);
    if (is_fp8(s) && gpu.compute_capability() < 89) continue;
    const double thr = error_threshold(s);
    const Dtype act = activation_dtype(s.dtype);
    const int bk = is_block(s) ? (*s.block_shape)[1] : 0;
    const HostWeightData hw = make_weights(s, case_seed += 101);
    const HostWeights hview = hw.view(s);
    DeviceWeights dw;
    if (is_fp8(s)) {
      dw.w13 = cuda::to_device(hw.w13_8);
      dw.w2 = cuda::to_device(hw.w2_8);
      dw.w13_scale = cuda::to_device(hw.w13_scale);
      dw.w2_scale = cuda::to_device(hw.w2_scale);
    } else {
      dw.w13 = cuda::to_device(hw.w13_16);
      dw.w2 = cuda::to_device(hw.w2_16);
    }
    std::vector<float> bias;
    if (s.routing.correction_bias) {
      Rng r{case_seed + 5};
      bias.resize(s.E_global);
      for (auto& b : bias) b = static_cast<float>((r.uniform() - 0.5) * 0.2);
      dw.bias = cuda::to_device(bias);
    }

    // The defaults for the arch the kernels are built for (opts.arch may not be the GPU's).
    const GpuSpec target = gpu_for_arch(gpu, arch);
    for (const std::int64_t M : opts.batch) {
      std::vector<std::pair<KernelConfig, KernelConfig>> configs;
      const int Md = static_cast<int>(std::min<std::int64_t>(M, 1 << 30));
      configs.emplace_back(moetune_default_config(s, target, Md),
                           moetune_default_config(s, target, Md, true));
      for (int i = 0; i < opts.random_configs; ++i)
        configs.push_back(random_valid_configs(s, gpu, arch, (case_seed += 7) ^ std::uint64_t(M)));

      for (std::size_t ci = 0; ci < configs.size(); ++ci) {
        const auto& [up, down] = configs[ci];
        const std::string cfg = config_text(up, down);
        auto emit = [&](const std::string& stage, double err, double threshold, std::int64_t rows,
                        std::string detail) {
          CheckResult r;
          r.shape = cs.name;
          r.dtype = variant;
          r.M = M;
          r.stage = stage;
          r.config = cfg;
          r.error = err;
          r.threshold = threshold;
          r.ok = std::isfinite(err) && err <= threshold;
          r.detail = std::move(detail);
          r.rows = rows;
          if (!r.ok && r.detail.empty())
            r.detail = std::isfinite(err) ? fmt::format("error {:.3g} > {:.3g}", err, threshold)
                                          : "output holds NaN or inf (unwritten or overflow)";
          if (on_result) on_result(r);
          report.results.push_back(std::move(r));
        };
        const int Mi = static_cast<int>(std::min<std::int64_t>(M, 1 << 30));
        FusedMoeOptions fo;
        fo.rank = cs.rank;
        fo.arch = arch;
        fo.topk_sum_in_gemm2 = opts.topk_sum_in_gemm2;
        fo.alignment_in_gemm1 = opts.alignment_in_gemm1;
        fo.sliced_stages = opts.sliced_stages;
        fo.sliced_pairs = opts.sliced_pairs;
        // The default config's layer as the GPU's rule runs it (the sliced kernel at M = 6..8
        // and 14..24 / 14..20 on the H100 SXM / H200); a random config's with the stage GEMMs
        // it configures, unless the sliced kernel is asked for.
        fo.sliced_gemms = ci == 0 ? opts.sliced_gemms
                                  : std::optional<bool>(opts.sliced_gemms.value_or(false));
        std::unique_ptr<FusedMoe> fm;
        try {
          fm = std::make_unique<FusedMoe>(s, gpu, ConfigTable{{Mi, up}}, ConfigTable{{Mi, down}},
                                          fo);
          fm->prepare(M);
        } catch (const std::exception& e) {
          emit("prepare", kNaN, thr, 0, e.what());
          continue;
        }
        const MoeWorkspaceLayout L = fm->workspace_layout(M);

        // Fresh random inputs.
        Rng r{(case_seed += 13)};
        std::vector<std::uint16_t> hidden(std::size_t(M) * s.K);
        std::vector<float> logits(std::size_t(M) * s.E_global);
        parallel_chunks(std::int64_t(hidden.size()), kSeedChunks, [&](std::int64_t lo, std::int64_t hi, std::uint64_t t) {
          Rng rr{r.s + t * 104729};
          for (std::int64_t i = lo; i < hi; ++i) hidden[i] = double_to_half_bits(act, rr.normal());
        });
        for (auto& l : logits) l = static_cast<float>(r.normal() * 2.0);
        cuda::DeviceBuffer d_hidden = cuda::to_device(hidden), d_logits = cuda::to_device(logits);
        cuda::DeviceBuffer ws(std::max<std::size_t>(L.total, 256));
        cuda::DeviceBuffer d_out(std::size_t(M) * s.K * 2);
        // Poison every output and the whole workspace: the call's alignment (or routing+align)
        // must zero the split-K counters itself, as the FusedMoe contract says.
        ws.fill_u8(0xFF);
        d_out.fill_u8(0xFF);

        MoeInputs in;
        in.M = M;
        in.hidden = reinterpret_cast<const void*>(d_hidden.ptr());
        in.router_logits = d_logits.as<const float>();
        try {
          // The stage kernels, whose intermediates the stage checks read from `ws`.
          fm->forward_staged(in, dw.view(), reinterpret_cast<void*>(d_out.ptr()),
                             reinterpret_cast<void*>(ws.ptr()), ws.bytes(), stream);
          stream.synchronize();
        } catch (const std::exception& e) {
          emit("forward", kNaN, thr, 0, e.what());
          continue;
        }
        // Where forward runs the decode kernels instead (uses_decode_kernels), its own call on a
        // second poisoned workspace and output: "layer (decode kernels)" judges that output next
        // to the stage kernels' "layer", and its routing must equal theirs (same code, same
        // inputs) bit for bit.
        bool decode = fm->uses_decode_kernels(M);
        std::vector<std::uint16_t> decode_out;
        std::vector<std::int32_t> decode_ids;
        std::vector<float> decode_weights;
        cuda::DeviceBuffer ws2, d_out2;
        if (decode) {
          ws2 = cuda::DeviceBuffer(std::max<std::size_t>(L.total, 256));
          d_out2 = cuda::DeviceBuffer(std::size_t(M) * s.K * 2);
          ws2.fill_u8(0xFF);
          d_out2.fill_u8(0xFF);
          try {
            fm->forward(in, dw.view(), reinterpret_cast<void*>(d_out2.ptr()),
                        reinterpret_cast<void*>(ws2.ptr()), ws2.bytes(), stream);
            stream.synchronize();
          } catch (const std::exception& e) {
            emit("forward (decode kernels)", kNaN, thr, 0, e.what());
            decode = false;  // the stage kernels' checks still run
          }
        }
        if (decode) {
          decode_ids = download<std::int32_t>(ws2, L.topk_ids, std::size_t(M) * s.topk);
          decode_weights = download<float>(ws2, L.topk_weights, std::size_t(M) * s.topk);
          decode_out = download<std::uint16_t>(d_out2, 0, std::size_t(M) * s.K);
        }

        // Download.
        const std::int64_t slots = M * s.topk;
        GpuCase g;
        g.topk_ids = download<std::int32_t>(ws, L.topk_ids, slots);
        g.topk_weights = download<float>(ws, L.topk_weights, slots);
        g.align.sorted_token_ids =
            download<std::int32_t>(ws, L.sorted_token_ids, L.max_num_tokens_padded);
        g.align.expert_ids = download<std::int32_t>(ws, L.expert_ids, L.max_num_m_blocks);
        g.align.num_tokens_post_padded =
            download<std::int32_t>(ws, L.num_tokens_post_padded, 1)[0];
        g.out = download<std::uint16_t>(d_out, 0, std::size_t(M) * s.K);
        if (decode) {
          std::int64_t differ = 0;
          for (std::size_t i = 0; i < decode_ids.size(); ++i)
            differ += decode_ids[i] != g.topk_ids[i] ||
                      std::memcmp(&decode_weights[i], &g.topk_weights[i], sizeof(float)) != 0;
          emit("decode routing", differ > 0 ? std::numeric_limits<double>::infinity() : 0.0, 0.0,
               M,
               differ > 0 ? fmt::format("{} of {} slots differ from the stage kernels' routing",
                                        differ, decode_ids.size())
                          : "the decode kernels' topk ids and weights equal the routing stage's");
        }
        const std::int64_t start = std::int64_t(cs.rank) * s.E;
        auto local = [&](std::int64_t slot) {
          const std::int64_t e = g.topk_ids[slot] - start;
          return e >= 0 && e < s.E;
        };

        // --- routing: a valid top-k (near-ties allowed) and its weights.
        if (opts.stages) {
          const RoutingResult ref = route_reference(logits.data(), Mi, s.E_global, s.topk,
                                                    s.routing, bias.empty() ? nullptr : bias.data());
          std::int64_t hard = 0, ties = 0;
          std::vector<double> gw, rw;
          for (std::int64_t t = 0; t < M; ++t) {
            const std::int32_t* gi = g.topk_ids.data() + t * s.topk;
            const std::int32_t* ri = ref.topk_ids.data() + t * s.topk;
            std::vector<std::int32_t> a(gi, gi + s.topk), b(ri, ri + s.topk);
            std::sort(a.begin(), a.end());
            std::sort(b.begin(), b.end());
            bool bad_id = false;
            for (std::int32_t id : a) bad_id |= id < 0 || id >= s.E_global;
            if (bad_id || std::adjacent_find(a.begin(), a.end()) != a.end()) {
              ++hard;
              continue;
            }
            if (a != b) {
              // Allowed only at a near-tie (of experts, or of groups: routing_near_tie).
              if (!routing_near_tie(ref, t, gi, s.E_global, s.topk, s.routing, 1e-5)) {
                ++hard;
                continue;
              }
              ++ties;
            }
            const auto w = routing_weights_for(logits.data() + t * s.E_global, s.E_global, gi,
                                               s.topk, s.routing);
            for (int j = 0; j < s.topk; ++j) {
              gw.push_back(g.topk_weights[t * s.topk + j]);
              rw.push_back(w[j]);
            }
          }
          const double err = hard > 0 ? kNaN : rel_error(gw, rw);
          emit("routing", hard > 0 ? std::numeric_limits<double>::infinity() : err, 1e-4, M,
               hard > 0 ? fmt::format("{} of {} tokens select other experts", hard, M)
                        : (ties > 0 ? fmt::format("{} near-ties", ties) : ""));
          // --- align (not where the sliced kernel derives it: it writes no tables, and the
          // layer's output checks its use of them)
          if (!(L.sliced && L.gemm1_aligns)) {
            const Alignment ref_al =
                align_reference(g.topk_ids.data(), M, s.topk, s.E, cs.rank, L.BLOCK_SIZE_M);
            const std::string diff = compare_alignment(g.align, ref_al, M, s.topk);
            emit("align", diff.empty() ? 0.0 : std::numeric_limits<double>::infinity(), 0.0, M,
                 diff);
          }
        }

        // Rows for the stage checks and the layer.
        const std::vector<std::int64_t> layer_rows =
            sample_rows(M, opts.max_reference_rows, case_seed + 3);
        const std::vector<std::int64_t> stage_rows =
            sample_rows(M, opts.stage_rows, case_seed + 4);

        if (opts.stages) {
          // --- quant (fp8): the GPU's q * scale against the reference quantizer on the same x.
          if (is_fp8(s)) {
            g.a_q = download<std::uint8_t>(ws, L.a_q, std::size_t(M) * s.K);
            g.a_scale = download<float>(ws, L.a_scale, bk > 0 ? std::size_t(M) * (s.K / bk) : 1);
            // Per-tensor: the scale needs max |x| over all of hidden; the values are compared
            // on the sampled rows.
            double amax = 0;
            for (std::uint16_t hb : hidden) amax = std::max(amax, std::fabs(half_bits_to_double(act, hb)));
            const double tensor_scale = static_cast<float>(std::max(amax, 1e-10) / kFp8Max);
            std::vector<double> got, ref_deq, x(s.K), rq(s.K), sc(bk > 0 ? s.K / bk : 1);
            for (std::int64_t t : layer_rows) {
              for (int k = 0; k < s.K; ++k) x[k] = half_bits_to_double(act, hidden[t * s.K + k]);
              if (bk > 0) {
                quant_fp8_group_reference(x.data(), 1, s.K, bk, rq.data(), sc.data());
              } else {
                for (int k = 0; k < s.K; ++k) rq[k] = round_e4m3(fp32_quotient(x[k], tensor_scale)) * tensor_scale;
              }
              for (int k = 0; k < s.K; ++k) {
                ref_deq.push_back(rq[k]);
                got.push_back(deq(g.a_q, g.a_scale, t, s.K, k, bk));
              }
            }
            emit("quant", rel_error(got, ref_deq), 1e-2, std::int64_t(layer_rows.size()), "");
          }
          // --- gemm1 / act / gemm2 / reduce on the GPU's own inputs, for stage_rows tokens.
          // bf16/fp16: GEMM1 wrote SiLU(gate)·up itself (no [slots, 2N] intermediate): the
          // fused stage is checked against silu_mul of the fp64 GEMM1 reference.
          // The persistent GEMM kernel always fuses (SiLU·up quantized in its GEMM1 epilogue), and
          // so does the sliced one, which keeps the quantized activation in shared memory: its
          // GEMM2 is checked on the reference's quantization of the fp64 SiLU·up instead.
          const bool sliced = L.sliced;
          const bool fused_act = L.gemm1_fused_act || L.persistent || sliced;
          if (!fused_act) g.h = download<std::uint16_t>(ws, L.h, std::size_t(slots) * 2 * s.N);
          // Block fp8: one kernel quantized SiLU·up from h (no 16-bit activation in memory);
          // act_quant is then checked against the quantization of the rounded fp64 SiLU·up.
          const bool act_in_memory = !L.act_quant_fused;
          if (act_in_memory) g.act = download<std::uint16_t>(ws, L.act, std::size_t(slots) * s.N);
          // GEMM2 added the top-k sum into out (no y in memory): gemm2 and reduce are checked
          // together, out against the fp64 sum of the fp64 GEMM2 reference.
          const bool sums_topk = L.gemm2_sums_topk;
          if (!sums_topk) g.y = download<std::uint16_t>(ws, L.y, std::size_t(slots) * s.K);
          if (is_fp8(s) && !sliced) {
            g.act_q = download<std::uint8_t>(ws, L.act_q, std::size_t(slots) * s.N);
            g.act_scale =
                download<float>(ws, L.act_scale, bk > 0 ? std::size_t(slots) * (s.N / bk) : 1);
          }
          double act_amax = 0;
          if (is_fp8(s) && bk == 0) {  // per-tensor act scale over all emitted slots
            for (std::int64_t sl = 0; sl < slots; ++sl)
              if (local(sl))
                for (int n = 0; n < s.N; ++n)
                  act_amax =
                      std::max(act_amax, std::fabs(half_bits_to_double(act, g.act[sl * s.N + n])));
          }
          // Per stage row: got/ref pairs of each stage, computed in parallel.
          struct RowOut {
            std::vector<double> h_got, h_ref, a_got, a_ref, aq_got, aq_ref, y_got, y_ref, o_got,
                o_ref;
          };
          std::vector<RowOut> rows_out(stage_rows.size());
          parallel_chunks(std::int64_t(stage_rows.size()), hardware_threads(),
                          [&](std::int64_t lo_r, std::int64_t hi_r, std::uint64_t) {
            std::vector<double> wrow(std::max(s.K, s.N)), xa(s.K), hrow(2 * s.N), arow(s.N),
                a_in(s.N), rq(s.N), token_ref(s.K);
            for (std::int64_t ri = lo_r; ri < hi_r; ++ri) {
              const std::int64_t t = stage_rows[ri];
              RowOut& o = rows_out[ri];
              std::fill(token_ref.begin(), token_ref.end(), 0.0);
              for (int k = 0; k < s.K; ++k)
                xa[k] = is_fp8(s) ? deq(g.a_q, g.a_scale, t, s.K, k, bk)
                                  : half_bits_to_double(act, hidden[t * s.K + k]);
              for (int j = 0; j < s.topk; ++j) {
                const std::int64_t sl = t * s.topk + j;
                if (!local(sl)) continue;
                const int e = static_cast<int>(g.topk_ids[sl] - start);
                for (int n = 0; n < 2 * s.N; ++n) {  // gemm1
                  w13_row(s, hview, e, n, wrow.data());
                  double acc = 0;
                  for (int k = 0; k < s.K; ++k) acc += xa[k] * wrow[k];
                  if (fused_act) {  // not in memory: act's reference starts from fp64
                    hrow[n] = acc;
                  } else {
                    o.h_ref.push_back(acc);
                    o.h_got.push_back(hrow[n] = half_bits_to_double(act, g.h[sl * 2 * s.N + n]));
                  }
                }
                silu_mul_reference(hrow.data(), 1, s.N, arow.data());  // act
                for (int n = 0; n < s.N; ++n) {
                  if (!act_in_memory) {  // the value the kernel rounds before quantizing
                    a_in[n] = half_bits_to_double(act, double_to_half_bits(act, arow[n]));
                    continue;
                  }
                  o.a_ref.push_back(arow[n]);
                  o.a_got.push_back(a_in[n] = half_bits_to_double(act, g.act[sl * s.N + n]));
                }
                if (is_fp8(s)) {  // act quant
                  if (bk > 0) {
                    std::vector<double> sc(s.N / bk);
                    quant_fp8_group_reference(a_in.data(), 1, s.N, bk, rq.data(), sc.data());
                  } else {
                    const double sc = static_cast<float>(std::max(act_amax, 1e-10) / kFp8Max);
                    for (int n = 0; n < s.N; ++n) rq[n] = round_e4m3(fp32_quotient(a_in[n], sc)) * sc;
                  }
                  for (int n = 0; n < s.N; ++n) {
                    if (sliced) {  // not in memory: GEMM2's reference takes the reference's
                      a_in[n] = rq[n];
                      continue;
                    }
                    o.aq_ref.push_back(rq[n]);
                    o.aq_got.push_back(a_in[n] = deq(g.act_q, g.act_scale, sl, s.N, n, bk));
                  }
                }
                const double wt = g.topk_weights[sl];  // gemm2, times the routed weight
                for (int k = 0; k < s.K; ++k) {
                  w2_row(s, hview, e, k, wrow.data());
                  double acc = 0;
                  for (int n = 0; n < s.N; ++n) acc += a_in[n] * wrow[n];
                  if (sums_topk) {
                    token_ref[k] += wt * acc;
                    continue;
                  }
                  o.y_ref.push_back(wt * acc);
                  o.y_got.push_back(half_bits_to_double(act, g.y[sl * s.K + k]));
                }
              }
              if (sums_topk) {
                for (int k = 0; k < s.K; ++k) {
                  o.o_ref.push_back(token_ref[k]);
                  o.o_got.push_back(half_bits_to_double(act, g.out[t * s.K + k]));
                }
                continue;
              }
              for (int k = 0; k < s.K; ++k) {  // reduce
                double acc = 0;
                for (int j = 0; j < s.topk; ++j)
                  if (local(t * s.topk + j))
                    acc += half_bits_to_double(act, g.y[(t * s.topk + j) * s.K + k]);
                o.o_ref.push_back(acc);
                o.o_got.push_back(half_bits_to_double(act, g.out[t * s.K + k]));
              }
            }
          });
          std::vector<double> h_got, h_ref, a_got, a_ref, aq_got, aq_ref, y_got, y_ref, o_got, o_ref;
          auto cat = [](std::vector<double>& dst, const std::vector<double>& src) {
            dst.insert(dst.end(), src.begin(), src.end());
          };
          for (const RowOut& o : rows_out) {
            cat(h_got, o.h_got);
            cat(h_ref, o.h_ref);
            cat(a_got, o.a_got);
            cat(a_ref, o.a_ref);
            cat(aq_got, o.aq_got);
            cat(aq_ref, o.aq_ref);
            cat(y_got, o.y_got);
            cat(y_ref, o.y_ref);
            cat(o_got, o.o_got);
            cat(o_ref, o.o_ref);
          }
          const std::int64_t nr = std::int64_t(stage_rows.size());
          if (fused_act && act_in_memory) {
            emit("gemm1+act", rel_error(a_got, a_ref), thr, nr,
                 "SiLU(gate)*up fused into GEMM1's epilogue, against the fp64 GEMM1 reference");
          } else if (!fused_act) {
            emit("gemm1", rel_error(h_got, h_ref), thr, nr, "");
            if (act_in_memory) emit("act", rel_error(a_got, a_ref), 1e-2, nr, "");
          }
          // Block fp8 fused: GEMM1 wrote the quantized activation itself (nothing 16-bit in
          // memory): the check of GEMM1 and the activation together.
          if (is_fp8(s) && sliced) {
            // Nothing between GEMM1 and the output is in memory: checked as one below.
          } else if (is_fp8(s) && fused_act)
            emit("gemm1+act+quant", rel_error(aq_got, aq_ref), 1e-2, nr,
                 "SiLU(gate)*up and its fp8 quantization in GEMM1's epilogue, against the "
                 "quantized fp64 SiLU(gate)*up of the fp64 GEMM1 reference");
          else if (is_fp8(s))
            emit(act_in_memory ? "act_quant" : "act+quant", rel_error(aq_got, aq_ref), 1e-2, nr,
                 act_in_memory ? ""
                               : "SiLU(gate)*up and its fp8 quantization in one kernel, against "
                                 "the quantized fp64 SiLU(gate)*up of GPU GEMM1's output");
          // 1e-2 in every dtype, as the reduce stage's: against a reference from the GPU's own
          // activation and dequantized weights, only roundings remain (~4e-3 measured), and a
          // lost or doubled slot row must not hide under fp8's 5e-2. Not the sliced kernel's
          // row: its reference quantizes its own fp64 activation, so e4m3 rounding flips of
          // the activation count, on top of a bf16 add per slot and 128-column slice (N / 128
          // per slot, not one): 5.1e-3..1.6e-2 in 54 checks at Qwen3.5 fp8 M = 6..8 and both
          // anchors at 14..24 on H100s (2026-12-07). 3e-2 is about twice the worst seen, and a
          // lost (slot, slice) row, about 0.25 / sqrt(rows) of the norm, still shows at the
          // 32 rows compared at most (0.044).
          if (sliced) {
            emit("gemm1+act+gemm2+reduce", rel_error(o_got, o_ref), 3e-2, nr,
                 "the sliced GEMM kernel's output, against the fp64 GEMM1, SiLU(gate)*up, its "
                 "fp8 quantization, GEMM2 and top-k sum from the GPU's quantized input");
          } else if (sums_topk) {
            emit("gemm2+reduce", rel_error(o_got, o_ref), 1e-2, nr,
                 "GEMM2 added each slot's row into the output (atomics), against the fp64 sum "
                 "of the fp64 GEMM2 reference on the GPU's activation");
          } else {
            emit("gemm2", rel_error(y_got, y_ref), thr, nr, "");
            emit("reduce", rel_error(o_got, o_ref), 1e-2, nr, "");
          }
        }

        // --- the whole layer, from hidden, with the GPU's (checked) routing.
        {
          LayerReferenceOptions lo;
          lo.rank = cs.rank;
          lo.threads = opts.reference_threads;
          if (is_fp8(s) && bk == 0) {
            lo.act_scale_override = download<float>(ws, L.act_scale, 1)[0];
          }
          const std::vector<double> ref =
              layer_reference(s, hview, M, hidden.data(), g.topk_ids.data(),
                              g.topk_weights.data(), layer_rows, lo);
          // The stage kernels' output ("layer") and, where forward runs them, the decode
          // kernels' ("layer (decode kernels)"), against the same reference.
          auto judge = [&](const char* stage, const std::vector<std::uint16_t>& layer_out) {
            std::vector<double> got;
            got.reserve(ref.size());
            for (std::int64_t t : layer_rows)
              for (int k = 0; k < s.K; ++k)
                got.push_back(half_bits_to_double(act, layer_out[t * s.K + k]));
            // Every element of out was written (poisoned with NaN before), sampled rows or not.
            std::int64_t non_finite = 0;
            for (std::uint16_t b : layer_out)
              non_finite += !std::isfinite(half_bits_to_double(act, b));
            if (non_finite > 0) {
              emit(stage, kNaN, thr, M,
                   fmt::format("{} of {} output elements are NaN/inf (unwritten or overflow)",
                               non_finite, layer_out.size()));
            } else {
              emit(stage, rel_error(got, ref), thr, std::int64_t(layer_rows.size()),
                   M > opts.max_reference_rows
                       ? fmt::format("reference on a sample of {} of {} tokens",
                                     layer_rows.size(), M)
                       : "");
            }
          };
          judge("layer", g.out);
          if (decode) judge("layer (decode kernels)", decode_out);
        }
      }
    }
  }
  report.wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

CheckReport run_check(const GpuSpec& gpu, const CheckOptions& opts,
                      const CheckCallback& on_result) {
  CheckReport all;
  const auto t0 = std::chrono::steady_clock::now();
  std::uint64_t seed = opts.seed;
  for (const CheckShape& cs : anchor_check_shapes()) {
    CheckOptions o = opts;
    o.seed = seed;
    CheckReport r = check_shape(cs, gpu, o, on_result);
    if (all.seed == 0) all.seed = r.seed;
    seed = r.seed + 1;
    all.results.insert(all.results.end(), r.results.begin(), r.results.end());
  }
  // The 32-bit-overflow case: M * topk * max(2N, K) > 2^31.
  CheckOptions big = opts;
  big.seed = seed;
  big.batch = {40000};
  big.dtypes = {"fp8_block"};
  big.random_configs = 0;
  const CheckReport r = check_shape(anchor_check_shapes()[1], gpu, big, on_result);
  all.results.insert(all.results.end(), r.results.begin(), r.results.end());
  all.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return all;
}

std::vector<cuda::KernelSpec> kernel_specs_for_compile_only(const std::string& arch) {
  std::vector<cuda::KernelSpec> specs;
  const auto shapes = anchor_check_shapes();
  const bool has_fp8 = [&] {
    // "sm_90a" -> 90; fp8 tensor cores from sm_89.
    int cc = 0;
    for (char ch : arch)
      if (ch >= '0' && ch <= '9') cc = cc * 10 + (ch - '0');
    return cc >= 89;
  }();
  for (const CheckShape& cs : shapes) {
    specs.push_back(routing_spec(cs.shape, arch));
    for (int bm : {16, 64}) specs.push_back(route_align_spec(cs.shape, bm, arch));
    const MoeShape f8 = with_dtype_variant(cs.shape, "fp8_block");  // quantizing in its spare blocks
    specs.push_back(routing_spec(f8, arch, true));
    specs.push_back(route_align_spec(f8, 16, arch, true));
    // The decode kernels (M <= 4): routing from logits, bf16 and (from sm_89) block fp8.
    for (const MoeShape& d : {cs.shape, f8}) {
      if ((d.dtype == Dtype::fp8_w8a8 && !has_fp8) || !decode_kernels_unfit(d).empty()) continue;
      for (std::int64_t M : {1, 2}) {  // moe_decode_up's geometry depends on M, and down's on it
        specs.push_back(decode_up_spec(d, arch, true, M));
        specs.push_back(decode_down_spec(d, arch, true, M));
      }
    }
  }
  if (arch == "sm_90a")  // the persistent GEMM kernel (block fp8, wgmma), at the layer's 4-slot ring
    for (const CheckShape& cs : shapes) {
      const MoeShape f8 = with_dtype_variant(cs.shape, "fp8_block");
      if (persistent_unfit(f8).empty()) specs.push_back(persistent_spec(f8, arch, 4));
      if (sliced_unfit(f8).empty()) {  // reading the alignment's tables, and deriving them
        specs.push_back(sliced_spec(f8, arch, kSlicedStages));
        if (sliced_derives_alignment(f8, 1))
          specs.push_back(sliced_spec(f8, arch, kSlicedStages, true));
        if (sliced_pairs_fit(f8))  // in pairs (--sliced-pairs), deriving where it can
          specs.push_back(
              sliced_spec(f8, arch, kSlicedStages, sliced_derives_alignment(f8, 1), true));
      }
    }
  {  // and from precomputed ids, once
    const MoeShape& d = shapes[0].shape;
    if (decode_kernels_unfit(d).empty()) {
      specs.push_back(decode_up_spec(d, arch, false, 1));
      specs.push_back(decode_down_spec(d, arch, false, 1));
    }
  }
  for (int bm : {16, 32, 64, 128, 256}) {
    specs.push_back(align_spec(bm, kAlignSmallThreads, arch));
    specs.push_back(align_spec(bm, kAlignLargeThreads, arch));
  }
  for (Dtype d : {Dtype::bf16, Dtype::fp16}) {
    MoeShape s = shapes[0].shape;
    s.dtype = d;
    specs.push_back(silu_mul_spec(s, arch));
    if (d == Dtype::bf16)  // block fp8's activation stage (bf16 activations, as quant's)
      specs.push_back(silu_mul_quant_spec(with_dtype_variant(s, "fp8_block"), arch));
    specs.push_back(topk_reduce_spec(s, arch));
    specs.push_back(quant_spec(d, 128, arch));
    specs.push_back(quant_spec(d, 0, arch));
    specs.push_back(amax_spec(d, arch));
  }
  // GEMM: one small-M and one large-M config per dtype the arch runs, up, down, up_act and
  // down_sum (the top-k sum added into the output: sm_90+, refused and left out below),
  // GEMM1 with SiLU(gate)·up fused as the layer runs it (bf16/fp16; block fp8 with the swap-AB
  // n256 tile, quantized in the epilogue). The large
  // one has 128-byte K rows in every dtype, so on sm_90a it is the wgmma kernel (for block fp8:
  // up, K = 3072, warp-specialized; down, N = 256, not). Swap-AB (decode, sm_90a only: other
  // archs refuse it and skip it here) with 128-byte rows too.
  const KernelConfig small{16, 64, 128, 1, 4, 3, 1}, large{64, 128, 64, 8, 4, 3, 1},
      large_fp8{64, 128, 128, 8, 4, 3, 1}, swap{16, 128, 64, 1, 4, 4, 1, 1},
      swap_fp8{16, 128, 128, 1, 4, 4, 1, 1}, swap_fp8_act{16, 256, 128, 1, 4, 3, 1, 1};
  for (const std::string& variant : kCheckDtypes) {
    const MoeShape s = with_dtype_variant(shapes[0].shape, variant);
    if (is_fp8(s) && !has_fp8) continue;
    for (const KernelConfig& c :
         {small, is_fp8(s) ? large_fp8 : large, is_fp8(s) ? swap_fp8 : swap, swap_fp8_act})
      for (gemm::GemmStage st :
           {gemm::GemmStage::up, gemm::GemmStage::up_act, gemm::GemmStage::down,
            gemm::GemmStage::down_sum}) {
        try {  // the configs a dtype cannot fuse (or run) throw and are left out
          specs.push_back(gemm::gemm_kernel_spec(s, c, st, arch));
        } catch (const InputError&) {
          // a config this arch cannot hold (shared memory): the set stays representative
        }
      }
  }
  // GEMM1 deriving the alignment (sm_90a, block fp8's swap-AB decode tiles: n256 fused, n128
  // unfused) on both anchors' expert counts.
  if (arch == "sm_90a" && has_fp8)
    for (const CheckShape& cs : shapes) {
      const MoeShape f8 = with_dtype_variant(cs.shape, "fp8_block");
      specs.push_back(
          gemm::gemm_kernel_spec(f8, swap_fp8_act, gemm::GemmStage::up_act, arch, true));
      specs.push_back(gemm::gemm_kernel_spec(f8, KernelConfig{16, 128, 128, 1, 4, 3, 1, 1},
                                             gemm::GemmStage::up, arch, true));
    }
  // The anchors share some kernels (the same decode kernels at M = 1 and 2 where the geometry
  // does not change): each once, so the count is of distinct kernels.
  std::set<std::string> seen;
  std::erase_if(specs, [&](const cuda::KernelSpec& k) { return !seen.insert(k.name).second; });
  return specs;
}

}  // namespace moetune::moe
