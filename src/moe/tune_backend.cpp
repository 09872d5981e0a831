#include "moe/tune_backend.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <future>
#include <map>
#include <string>

#include "bench/measure.hpp"
#include "cuda/context.hpp"
#include "cuda/device.hpp"
#include "cuda/driver.hpp"
#include "cuda/jit.hpp"
#include "cuda/kernel_sources.hpp"
#include "cuda/nvml.hpp"
#include "gemm/gemm.hpp"
#include "moe/check.hpp"
#include "moe/parallel.hpp"
#include "moe/reference.hpp"
#include "moe/stages.hpp"
#include "moetune/error.hpp"
#include "perf/splitmix64.hpp"

namespace moetune::moe {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

using Rng = SplitMix64;
std::uint64_t mix(std::uint64_t a, std::uint64_t b) {
  Rng r{a ^ (b * 0xD1B54A32D192ED03ULL + 0x8CB92BA72F3D8DD7ULL)};
  return r.next();
}

// The GEMM as the layer runs it at M with config c: GEMM1 has SiLU(gate)·up fused into its
// epilogue at decode sizes (bf16/fp16; block fp8 where c can, quantized: gemm::gemm1_stage),
// so the tuner measures and checks that kernel.
gemm::GemmStage gemm_stage(const MoeShape& shape, tune::Stage s, std::int64_t M,
                           const KernelConfig& c) {
  return s == tune::Stage::up ? gemm::gemm1_stage(shape, M, c) : gemm::GemmStage::down;
}
bool is_fp8(const MoeShape& s) { return s.dtype == Dtype::fp8_w8a8; }
bool is_block(const MoeShape& s) { return is_fp8(s) && s.block_shape.has_value(); }
// Rows of the stage's weight (w13: 2N, w2: K); the output's columns are gemm::gemm_out_cols.
int n_out(const MoeShape& s, tune::Stage st) { return st == tune::Stage::up ? 2 * s.N : s.K; }
int k_red(const MoeShape& s, tune::Stage st) { return st == tune::Stage::up ? s.K : s.N; }
std::int64_t a_rows(const MoeShape& s, tune::Stage st, std::int64_t M) {
  return st == tune::Stage::up ? M : M * s.topk;
}
std::size_t element_bytes(Dtype d) { return d == Dtype::fp8_w8a8 ? 1 : 2; }

// ---- host tensors in storage format ------------------------------------------------------------
struct HostOperand {
  std::vector<std::uint8_t> data;  // bf16/fp16 bits or e4m3 codes
  std::vector<float> scale;        // fp8: block or per-tensor scales; else empty
};

// n random elements of dtype d: bf16/fp16 uniform in [-amp, amp); fp8 e4m3 codes of magnitude
// below 32 (exponent field <= 11, never NaN). Chunked seeds: the same bytes on any core count.
std::vector<std::uint8_t> random_elements(std::size_t n, Dtype d, double amp, std::uint64_t seed) {
  const std::size_t eb = element_bytes(d);
  std::vector<std::uint8_t> out(n * eb);
  constexpr std::size_t kChunk = std::size_t(1) << 18;
  const std::int64_t chunks = static_cast<std::int64_t>((n + kChunk - 1) / kChunk);
  parallel_for(chunks, 0, [&](std::int64_t c) {
    Rng rng{mix(seed, static_cast<std::uint64_t>(c))};
    const std::size_t lo = static_cast<std::size_t>(c) * kChunk, hi = std::min(n, lo + kChunk);
    for (std::size_t i = lo; i < hi; ++i) {
      if (d == Dtype::fp8_w8a8) {
        const std::uint64_t r = rng.next();
        const auto e = static_cast<std::uint8_t>(r % 12);
        const auto m = static_cast<std::uint8_t>((r >> 8) & 7);
        const auto sign = static_cast<std::uint8_t>((r >> 16) & 1);
        out[i] = static_cast<std::uint8_t>((sign << 7) | (e << 3) | m);
      } else {
        const std::uint16_t h = double_to_half_bits(d, (2 * rng.uniform() - 1) * amp);
        std::memcpy(&out[i * 2], &h, 2);
      }
    }
  });
  return out;
}

// Scales in [2^-8, 2^-6): products of fp8 values (< 32) stay far from overflow.
std::vector<float> random_scales(std::size_t n, std::uint64_t seed) {
  std::vector<float> v(n);
  Rng rng{seed};
  for (float& x : v) {
    x = std::ldexp(static_cast<float>(1 + rng.uniform()), -8 + static_cast<int>(rng.next() % 2));
  }
  return v;
}

// w13 [E, 2N, K] (up) or w2 [E, K, N] (down) with its scales.
HostOperand make_weight(const MoeShape& s, tune::Stage st, std::uint64_t seed) {
  HostOperand h;
  const std::size_t rows = static_cast<std::size_t>(s.E) * n_out(s, st);
  h.data = random_elements(rows * k_red(s, st), s.dtype, 1 / std::sqrt(double(k_red(s, st))), seed);
  if (is_block(s)) {
    const auto [bn, bk] = *s.block_shape;
    const std::size_t rb = (n_out(s, st) + bn - 1) / bn, cb = (k_red(s, st) + bk - 1) / bk;
    h.scale = random_scales(static_cast<std::size_t>(s.E) * rb * cb, mix(seed, 1));
  } else if (is_fp8(s)) {
    h.scale = random_scales(s.E, mix(seed, 1));
  }
  return h;
}

// The GEMM's A operand: up hidden [M, K], down intermediate [M*topk, N] (fp8: codes + scales).
HostOperand make_input(const MoeShape& s, tune::Stage st, std::int64_t M, std::uint64_t seed) {
  HostOperand h;
  const auto rows = static_cast<std::size_t>(a_rows(s, st, M));
  h.data = random_elements(rows * k_red(s, st), s.dtype, 1.0, seed);
  if (is_block(s)) {
    h.scale = random_scales(rows * (k_red(s, st) / (*s.block_shape)[1]), mix(seed, 2));
  } else if (is_fp8(s)) {
    h.scale = random_scales(1, mix(seed, 2));
  }
  return h;
}

// ---- device data -------------------------------------------------------------------------------
struct DeviceOperand {
  cuda::DeviceBuffer data, scale;
  const float* scale_ptr() const { return scale.empty() ? nullptr : scale.as<const float>(); }
};
DeviceOperand upload(const HostOperand& h) {
  DeviceOperand d;
  d.data = cuda::DeviceBuffer(std::max<std::size_t>(h.data.size(), 16));
  d.data.upload(h.data.data(), h.data.size());
  if (!h.scale.empty()) {
    d.scale = cuda::DeviceBuffer(h.scale.size() * sizeof(float));
    d.scale.upload(h.scale);
  }
  return d;
}
DeviceOperand copy_of(const DeviceOperand& src, CUstream stream) {
  DeviceOperand d;
  d.data = cuda::DeviceBuffer(src.data.bytes());
  d.data.copy_from_async(src.data, src.data.bytes(), stream);
  if (!src.scale.empty()) {
    d.scale = cuda::DeviceBuffer(src.scale.bytes());
    d.scale.copy_from_async(src.scale, src.scale.bytes(), stream);
  }
  return d;
}

struct DeviceSet {
  cuda::DeviceBuffer sorted_token_ids, expert_ids, num_tokens_post_padded, topk_weights, topk_ids;
  std::int64_t capacity = 0;
};
DeviceSet upload(const RoutingSet& r) {
  DeviceSet d;
  d.capacity = static_cast<std::int64_t>(r.alignment.sorted_token_ids.size());
  d.sorted_token_ids = cuda::DeviceBuffer(std::max<std::size_t>(d.capacity * 4, 16));
  d.sorted_token_ids.upload(r.alignment.sorted_token_ids);
  d.expert_ids = cuda::DeviceBuffer(std::max<std::size_t>(r.alignment.expert_ids.size() * 4, 16));
  d.expert_ids.upload(r.alignment.expert_ids);
  d.num_tokens_post_padded = cuda::DeviceBuffer(16);
  d.num_tokens_post_padded.upload(&r.alignment.num_tokens_post_padded, 4);
  d.topk_weights = cuda::DeviceBuffer(std::max<std::size_t>(r.topk_weights.size() * 4, 16));
  d.topk_weights.upload(r.topk_weights);
  d.topk_ids = cuda::DeviceBuffer(std::max<std::size_t>(r.topk_ids.size() * 4, 16));
  d.topk_ids.upload(r.topk_ids);
  return d;
}

// Weights of one (shape, stage): the host copy (for check) and device copies (cold rotation).
struct StageWeights {
  HostOperand host;
  std::vector<DeviceOperand> copies;
};

// Inputs of one (M, stage): device copies of one random A, and the output.
struct StageInputs {
  std::vector<DeviceOperand> copies;
  cuda::DeviceBuffer out;        // the largest output of the stage (GEMM1 unfused: 2N columns)
  cuda::DeviceBuffer out_scale;  // block fp8 GEMM1: the activation scales (fused or not)
  cuda::DeviceBuffer act_q;      // block fp8 GEMM1 unfused: the activation stage's e4m3 output
};

std::string first_line(const std::string& text) {
  const std::size_t nl = text.find('\n');
  return nl == std::string::npos ? text : text.substr(0, nl);
}

// "NVRTC failed to compile X ...:" plus the log's first non-empty line.
std::string compile_failure(const std::string& what) {
  std::string head = first_line(what);
  std::size_t pos = what.find('\n');
  while (pos != std::string::npos) {
    const std::size_t end = what.find('\n', pos + 1);
    std::string line = what.substr(pos + 1, end == std::string::npos ? std::string::npos : end - pos - 1);
    if (line.find_first_not_of(" \t\r") != std::string::npos) return head + " " + line;
    pos = end;
  }
  return head;
}

// Compile threads: $MOETUNE_COMPILE_THREADS (the parent shares the cores among its workers),
// else 0 (every core).
int compile_threads() {
  const char* env = std::getenv("MOETUNE_COMPILE_THREADS");
  if (env == nullptr) return 0;
  const int n = std::atoi(env);
  return n > 0 ? n : 0;
}

constexpr std::size_t kMaxInputCopyBytes = std::size_t(64) << 20;

}  // namespace

RoutingSet make_routing_set(const MoeShape& shape, std::int64_t M, int BLOCK_SIZE_M,
                            std::uint64_t seed) {
  const int Eg = shape.E_global > 0 ? shape.E_global : shape.E;
  if (M < 1) throw InputError("M", std::to_string(M), "must be at least 1");
  if (BLOCK_SIZE_M < 1) {
    throw InputError("BLOCK_SIZE_M", std::to_string(BLOCK_SIZE_M), "must be positive");
  }
  if (shape.topk < 1 || shape.topk > Eg) {
    throw InputError("topk", std::to_string(shape.topk),
                     fmt::format("must be in [1, E_global = {}]", Eg));
  }
  RoutingSet r;
  const int topk = shape.topk;
  r.topk_ids.resize(static_cast<std::size_t>(M) * topk);
  r.topk_weights.resize(r.topk_ids.size());
  Rng rng{mix(seed, static_cast<std::uint64_t>(M))};
  for (std::int64_t t = 0; t < M; ++t) {
    std::int32_t* ids = &r.topk_ids[t * topk];
    for (int j = 0; j < topk; ++j) {
      std::int32_t e;
      do {
        e = static_cast<std::int32_t>(rng.next() % static_cast<std::uint64_t>(Eg));
      } while (std::find(ids, ids + j, e) != ids + j);
      ids[j] = e;
      r.topk_weights[t * topk + j] = static_cast<float>(0.05 + 0.95 * rng.uniform());
    }
  }
  r.alignment = align_reference(r.topk_ids.data(), M, topk, shape.E, 0, BLOCK_SIZE_M);
  return r;
}

// ---- the backend ---------------------------------------------------------------------------------
struct GemmWorkerBackend::Impl {
  bool opened = false;
  cuda::Context* ctx = nullptr;
  cuda::DeviceInfo info;
  std::unique_ptr<cuda::Stream> stream;
  bool lost = false;

  std::vector<std::future<std::vector<cuda::CompiledKernel>>> builds;

  std::string shape_key;                       // shape_to_wire dump of the cached data
  std::map<int, StageWeights> weights;          // by stage
  std::int64_t data_M = -1;                     // M of the cached sets and inputs
  std::map<int, std::vector<DeviceSet>> sets;   // by BLOCK_SIZE_M
  std::map<int, StageInputs> inputs;            // by stage
  std::map<int, cuda::DeviceBuffer> workspace;  // by stage; counters zero while clean
  std::map<int, bool> workspace_dirty;

  void open() {
    if (opened) return;
    cuda::require_gpu();
    ctx = &cuda::Context::get(0);
    info = cuda::query_device(0);
    stream = std::make_unique<cuda::Stream>(*ctx);
    opened = true;
  }

  void require_usable() const {
    if (lost) throw CudaError("the CUDA context was lost by an earlier launch; restart the worker");
  }

  // Whether the context still works after a CudaError (a fault is sticky: every call fails).
  bool context_usable() {
    try {
      ctx->synchronize();
      cuda::DeviceBuffer probe(256);
      probe.fill_u8(0);
      return true;
    } catch (const std::exception&) {
      return false;
    }
  }

  void forget_finished_builds() {
    std::erase_if(builds, [](auto& f) {
      return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
    });
  }

  void use_shape(const MoeShape& shape) {
    const std::string key = tune::shape_to_wire(shape).dump();
    if (key == shape_key) return;
    weights.clear();
    sets.clear();
    inputs.clear();
    data_M = -1;
    shape_key = key;
  }

  void use_M(std::int64_t M) {
    if (M == data_M) return;
    sets.clear();
    inputs.clear();
    data_M = M;
  }

  StageWeights& stage_weights(const MoeShape& shape, tune::Stage st, std::uint64_t seed) {
    auto it = weights.find(static_cast<int>(st));
    if (it != weights.end()) return it->second;
    StageWeights w;
    w.host = make_weight(shape, st, mix(seed, st == tune::Stage::up ? 13 : 2));
    w.copies.push_back(upload(w.host));
    // Cold: the weights alone should exceed twice the L2; copies make up for a small shape.
    const double bytes = double(w.host.data.size());
    const double want = 2.5 * std::max(info.l2_bytes, 1);
    const int n = std::clamp(static_cast<int>(std::ceil(want / bytes)), 1, 16);
    for (int i = 1; i < n; ++i) w.copies.push_back(copy_of(w.copies[0], *stream));
    stream->synchronize();
    return weights.emplace(static_cast<int>(st), std::move(w)).first->second;
  }

  std::vector<DeviceSet>& routing_sets(const MoeShape& shape, std::int64_t M, int BM, int count,
                                       std::uint64_t seed) {
    std::vector<DeviceSet>& v = sets[BM];
    while (static_cast<int>(v.size()) < count) {
      const RoutingSet r = make_routing_set(shape, M, BM, mix(seed, 1000 + v.size()));
      v.push_back(upload(r));
    }
    return v;
  }

  StageInputs& stage_inputs(const MoeShape& shape, tune::Stage st, std::int64_t M, int count,
                            std::uint64_t seed) {
    auto it = inputs.find(static_cast<int>(st));
    if (it != inputs.end()) return it->second;
    StageInputs in;
    const HostOperand h = make_input(shape, st, M, mix(seed, 77 + static_cast<int>(st)));
    in.copies.push_back(upload(h));
    const int n = std::clamp(static_cast<int>(kMaxInputCopyBytes / std::max<std::size_t>(h.data.size(), 1)),
                             1, std::max(count, 1));
    for (int i = 1; i < n; ++i) in.copies.push_back(copy_of(in.copies[0], *stream));
    const std::size_t slots = static_cast<std::size_t>(M) * shape.topk;
    in.out = cuda::DeviceBuffer(slots * n_out(shape, st) * 2);
    if (st == tune::Stage::up && is_block(shape)) {
      in.out_scale = cuda::DeviceBuffer(slots * (shape.N / (*shape.block_shape)[1]) * 4);
      in.act_q = cuda::DeviceBuffer(std::max<std::size_t>(slots * shape.N, 16));
    }
    stream->synchronize();
    return inputs.emplace(static_cast<int>(st), std::move(in)).first->second;
  }

  // A workspace of at least `bytes` whose split-K counters are zero (zeroed once per size).
  cuda::DeviceBuffer& stage_workspace(tune::Stage st, std::size_t bytes) {
    cuda::DeviceBuffer& w = workspace[static_cast<int>(st)];
    bool& dirty = workspace_dirty[static_cast<int>(st)];
    if (w.bytes() < bytes) {
      w = cuda::DeviceBuffer();
      w = cuda::DeviceBuffer(bytes);
      dirty = true;
    }
    if (dirty) {
      w.fill_u8(0);
      dirty = false;
    }
    return w;
  }

  // Waits for (or does) this kernel's build; "" when it compiled, else the reason.
  std::string build(const cuda::KernelSpec& spec) {
    try {
      const cuda::CompiledKernel k = cuda::Jit::instance().compile(spec);
      if (k.cubin.empty()) return "NVRTC produced no cubin for " + spec.name;
      return "";
    } catch (const CudaError& e) {
      return compile_failure(e.what());
    } catch (const InputError& e) {
      return e.what();
    }
  }
};

GemmWorkerBackend::GemmWorkerBackend() : impl_(std::make_unique<Impl>()) {}
GemmWorkerBackend::~GemmWorkerBackend() = default;

bool GemmWorkerBackend::context_lost() const { return impl_->lost; }

nlohmann::json GemmWorkerBackend::hello() {
  impl_->open();
  const cuda::DeviceInfo& d = impl_->info;
  std::string driver = cuda::nvml_driver_version();
  if (driver.empty() || driver == "unknown") driver = d.driver_version_string();
  return {{"name", d.name},
          {"sm", d.arch()},
          {"sms", d.sm_count},
          {"l2_bytes", d.l2_bytes},
          {"driver", driver},
          {"cuda", d.driver_version_string()},
          {"nvrtc", cuda::Jit::instance().nvrtc_version()},
          {"kernel_source_hash", std::string(cuda::kernel_source_hash())}};
}

std::vector<tune::MeasureReply> GemmWorkerBackend::compile(
    const MoeShape& shape, tune::Stage stage, const std::vector<KernelConfig>& configs, int M) {
  impl_->open();
  impl_->forget_finished_builds();
  std::vector<tune::MeasureReply> out(configs.size());
  std::vector<cuda::KernelSpec> specs;
  for (std::size_t i = 0; i < configs.size(); ++i) {
    // The GEMM that measuring at M runs; without M (0), a GEMM1 config that fuses at decode
    // sizes gets both epilogues, fused and not (gemm::gemm1_stage).
    std::vector<gemm::GemmStage> stages{gemm_stage(shape, stage, M > 0 ? M : 1, configs[i])};
    if (M <= 0 && stages[0] == gemm::GemmStage::up_act) stages.push_back(gemm::GemmStage::up);
    try {
      for (gemm::GemmStage gs : stages)
        specs.push_back(gemm::gemm_kernel_spec(shape, configs[i], gs, impl_->info.arch()));
    } catch (const InputError& e) {
      out[i].status = tune::CandidateStatus::pruned;
      out[i].reason = e.what();
    }
  }
  if (!specs.empty()) {
    impl_->builds.push_back(
        cuda::Jit::instance().compile_many_async(std::move(specs), compile_threads()));
  }
  return out;
}

tune::MeasureReply GemmWorkerBackend::measure(const tune::MeasureRequest& r) {
  Impl& m = *impl_;
  m.open();
  m.require_usable();
  tune::MeasureReply reply;
  const gemm::GemmStage gs = gemm_stage(r.shape, r.stage, r.M, r.config);
  cuda::KernelSpec spec;
  try {
    spec = gemm::gemm_kernel_spec(r.shape, r.config, gs, m.info.arch());
  } catch (const InputError& e) {
    reply.status = tune::CandidateStatus::pruned;
    reply.reason = e.what();
    return reply;
  }
  const auto tc = Clock::now();
  const std::string failed = m.build(spec);
  reply.compile_s = seconds_since(tc);
  if (!failed.empty()) {
    reply.status = tune::CandidateStatus::compile_failed;
    reply.reason = failed;
    return reply;
  }

  const auto t0 = Clock::now();
  const int rotation = r.hot ? 1 : std::max(1, r.rotation);
  try {
    m.use_shape(r.shape);
    m.use_M(r.M);
    const StageWeights& w = m.stage_weights(r.shape, r.stage, r.seed);
    const std::vector<DeviceSet>& sets =
        m.routing_sets(r.shape, r.M, r.config.BLOCK_SIZE_M, rotation, r.seed);
    StageInputs& in = m.stage_inputs(r.shape, r.stage, r.M, rotation, r.seed);
    const std::size_t ws_bytes = gemm::gemm_workspace_bytes(r.shape, r.config, gs, r.M);
    cuda::DeviceBuffer* ws = ws_bytes > 0 ? &m.stage_workspace(r.stage, ws_bytes) : nullptr;

    std::vector<gemm::GemmArgs> args(static_cast<std::size_t>(rotation));
    for (int i = 0; i < rotation; ++i) {
      const DeviceSet& set = sets[i];
      const DeviceOperand& a = in.copies[i % in.copies.size()];
      const DeviceOperand& wt = w.copies[i % w.copies.size()];
      gemm::GemmArgs& g = args[i];
      g.stage = gs;
      g.a = a.data.as<const void>();
      g.a_scale = a.scale_ptr();
      g.w = wt.data.as<const void>();
      g.w_scale = wt.scale_ptr();
      g.out = in.out.as<void>();
      if (gs == gemm::GemmStage::up_act && is_block(r.shape)) g.out_scale = in.out_scale.as<float>();
      g.topk_weights = set.topk_weights.as<const float>();
      g.sorted_token_ids = set.sorted_token_ids.as<const std::int32_t>();
      g.expert_ids = set.expert_ids.as<const std::int32_t>();
      g.num_tokens_post_padded = set.num_tokens_post_padded.as<const std::int32_t>();
      g.M = r.M;
      g.max_num_tokens_padded = set.capacity;
      if (ws != nullptr) {
        g.workspace = ws->as<void>();
        g.workspace_bytes = ws->bytes();
        g.workspace_counters_zeroed = true;  // zeroed once; every launch leaves them zero
      }
    }
    bench::MeasureOptions mo;
    mo.hot = r.hot;
    mo.rotation = rotation;
    mo.min_replays = mo.max_replays = std::max(1, r.replays);
    mo.batch_replays = std::min(mo.batch_replays, mo.max_replays);
    const MoeShape& shape = r.shape;
    const KernelConfig& config = r.config;
    // Block fp8 GEMM1 where the layer fuses the activation for configs that can
    // (gemm::gemm1_stage): an unfused candidate is timed with the activation stage after it, so
    // that both kinds are timed up to GEMM2's input (its e4m3 activation and scales). 16-bit
    // GEMM1 needs no such pairing: validate_config admits only 16-bit tiles that fuse
    // (config/kernel_rules.hpp), so every 16-bit candidate in the band is fused.
    const bool with_act = r.stage == tune::Stage::up && is_block(shape) &&
                          gs == gemm::GemmStage::up && gemm::gemm1_fuse_band(shape, r.M);
    if (with_act) {
      if (const std::string failed = m.build(silu_mul_quant_spec(shape, m.info.arch()));
          !failed.empty()) {
        reply.status = tune::CandidateStatus::compile_failed;
        reply.reason = "the activation stage timed with it: " + failed;
        reply.measure_s = seconds_since(t0);
        return reply;
      }
    }
    const std::string arch = m.info.arch();
    const bench::Samples s = bench::measure(
        [&](CUstream st, int i) {
          gemm::launch_gemm(shape, config, args[i % rotation], st);
          if (with_act)
            launch_silu_mul_quant(shape, arch, in.out.as<const void>(), in.act_q.as<std::uint8_t>(),
                                  in.out_scale.as<float>(),
                                  sets[i % rotation].topk_ids.as<const std::int32_t>(), r.M, 0, st);
        },
        mo);
    reply.times_s = s.per_call_s;
    reply.clock = {{"default_mhz", s.clock.default_mhz},
                   {"median_mhz", s.clock.median_mhz},
                   {"min_mhz", s.clock.min_mhz},
                   {"throttled", s.clock.throttled}};
  } catch (const CudaError& e) {
    reply.status = tune::CandidateStatus::launch_failed;
    reply.reason = first_line(e.what());
    reply.times_s.clear();
    m.workspace_dirty[static_cast<int>(r.stage)] = true;
    m.lost = !m.context_usable();
  } catch (const InputError& e) {
    reply.status = tune::CandidateStatus::launch_failed;
    reply.reason = e.what();
    reply.times_s.clear();
  }
  reply.measure_s = seconds_since(t0);
  return reply;
}

tune::CheckResult GemmWorkerBackend::check(const tune::CheckRequest& r) {
  Impl& m = *impl_;
  m.open();
  m.require_usable();
  tune::CheckResult result;
  const gemm::GemmStage gs = gemm_stage(r.shape, r.stage, r.M, r.config);
  const MoeShape& s = r.shape;
  cuda::KernelSpec spec;
  try {
    spec = gemm::gemm_kernel_spec(s, r.config, gs, m.info.arch());
  } catch (const InputError& e) {
    result.reason = e.what();
    return result;
  }
  if (const std::string failed = m.build(spec); !failed.empty()) {
    result.reason = "compile failed: " + failed;
    return result;
  }
  // wr: weight rows (2N for w13); no: output columns (N when GEMM1 fuses SiLU(gate)·up).
  const int wr = n_out(s, r.stage), no = gemm::gemm_out_cols(s, gs), kr = k_red(s, r.stage);
  const bool fused_act = gs == gemm::GemmStage::up_act;
  // Block fp8 fused: e4m3 out with per-(slot, block_k group) scales (GEMM2's input).
  const bool quant_out = fused_act && is_block(s);
  const int group = quant_out ? (*s.block_shape)[1] : 0;
  const std::int64_t slots = std::int64_t(r.M) * s.topk;
  const Dtype act = activation_dtype(s.dtype);
  const std::uint64_t seed = mix(r.seed ^ 0xC0FFEEULL, static_cast<std::uint64_t>(r.M) * 2 + (r.stage == tune::Stage::up ? 0 : 1));
  RoutingSet routing;
  HostOperand a;
  std::vector<std::uint16_t> got_all;  // 16-bit out
  std::vector<std::uint8_t> got_q;     // quant_out: e4m3 out and its scales
  std::vector<float> got_scale;
  try {
    m.use_shape(s);
    const StageWeights& w = m.stage_weights(s, r.stage, r.seed);
    routing = make_routing_set(s, r.M, r.config.BLOCK_SIZE_M, seed);
    a = make_input(s, r.stage, r.M, mix(seed, 5));
    const DeviceSet set = upload(routing);
    const DeviceOperand da = upload(a);
    cuda::DeviceBuffer out(static_cast<std::size_t>(slots) * no * (quant_out ? 1 : 2));
    out.fill_u8(0xFF);  // NaN in bf16/fp16 and e4m3: rows the kernel fails to write show up
    cuda::DeviceBuffer out_scale(quant_out ? static_cast<std::size_t>(slots) * (no / group) * 4 : 16);
    out_scale.fill_u8(0xFF);
    const std::size_t ws_bytes = gemm::gemm_workspace_bytes(s, r.config, gs, r.M);
    cuda::DeviceBuffer ws(std::max<std::size_t>(ws_bytes, 16));
    gemm::GemmArgs g;
    g.stage = gs;
    g.a = da.data.as<const void>();
    g.a_scale = da.scale_ptr();
    g.w = w.copies[0].data.as<const void>();
    g.w_scale = w.copies[0].scale_ptr();
    g.out = out.as<void>();
    if (quant_out) g.out_scale = out_scale.as<float>();
    g.topk_weights = set.topk_weights.as<const float>();
    g.sorted_token_ids = set.sorted_token_ids.as<const std::int32_t>();
    g.expert_ids = set.expert_ids.as<const std::int32_t>();
    g.num_tokens_post_padded = set.num_tokens_post_padded.as<const std::int32_t>();
    g.M = r.M;
    g.max_num_tokens_padded = set.capacity;
    if (ws_bytes > 0) {
      g.workspace = ws.as<void>();
      g.workspace_bytes = ws_bytes;  // counters zeroed by launch_gemm (a memset first)
    }
    gemm::launch_gemm(s, r.config, g, *m.stream);
    m.stream->synchronize();
    if (quant_out) {
      got_q = out.download_as<std::uint8_t>(static_cast<std::size_t>(slots) * no);
      got_scale = out_scale.download_as<float>(static_cast<std::size_t>(slots) * (no / group));
    } else {
      got_all = out.download_as<std::uint16_t>(static_cast<std::size_t>(slots) * no);
    }
  } catch (const CudaError& e) {
    result.reason = "launch failed: " + first_line(e.what());
    m.lost = !m.context_usable();
    return result;
  } catch (const InputError& e) {
    result.reason = e.what();
    return result;
  }

  // The kernel's value at (slot, column n): 16-bit, or dequantized e4m3.
  auto value = [&](std::int64_t slot, int n) {
    if (!quant_out) return half_bits_to_double(act, got_all[slot * no + n]);
    return e4m3_to_double(got_q[slot * no + n]) *
           static_cast<double>(got_scale[slot * (no / group) + n / group]);
  };
  // Every row of a slot on this rank (rank 0: experts [0, E)) must be written and finite.
  auto on_rank = [&](std::int64_t slot) { return routing.topk_ids[slot] < s.E; };
  for (std::int64_t slot = 0; slot < slots; ++slot) {
    if (!on_rank(slot)) continue;
    for (int n = 0; n < no; ++n) {
      if (!std::isfinite(value(slot, n))) {
        result.rel_error = std::numeric_limits<double>::quiet_NaN();
        result.reason = fmt::format("output row {} (of {}) holds NaN/inf at column {}", slot,
                                    slots, n);
        return result;
      }
    }
  }

  // The fp64 reference on sampled rows, from the same (dequantized) operands.
  std::vector<std::int64_t> rows;
  for (std::int64_t slot : sample_rows(slots, kCheckRows, mix(seed, 9))) {
    if (on_rank(slot)) rows.push_back(slot);
  }
  const StageWeights& w = m.weights.at(static_cast<int>(r.stage));
  HostWeights hw;
  hw.dtype = s.dtype;
  hw.block_shape = s.block_shape;
  (r.stage == tune::Stage::up ? hw.w13 : hw.w2) = w.host.data.data();
  (r.stage == tune::Stage::up ? hw.w13_scale : hw.w2_scale) =
      w.host.scale.empty() ? nullptr : w.host.scale.data();
  std::vector<double> ref(rows.size() * no), got(rows.size() * no);
  parallel_for(static_cast<std::int64_t>(rows.size()), 0, [&](std::int64_t i) {
    const std::int64_t slot = rows[i];
    const std::int64_t arow = r.stage == tune::Stage::up ? slot / s.topk : slot;
    std::vector<double> x(kr), wrow(kr), h(wr), act_ref(fused_act ? s.N : 0),
        act_q(quant_out ? s.N : 0), act_scale(quant_out ? s.N / group : 0);
    for (int k = 0; k < kr; ++k) {
      const std::size_t at = static_cast<std::size_t>(arow) * kr + k;
      if (is_fp8(s)) {
        const double scale = is_block(s)
                                 ? a.scale[arow * (kr / (*s.block_shape)[1]) + k / (*s.block_shape)[1]]
                                 : a.scale[0];
        x[k] = e4m3_to_double(a.data[at]) * scale;
      } else {
        std::uint16_t bits;
        std::memcpy(&bits, &a.data[at * 2], 2);
        x[k] = half_bits_to_double(s.dtype, bits);
      }
    }
    const int e = routing.topk_ids[slot];
    const double route = r.stage == tune::Stage::down ? routing.topk_weights[slot] : 1.0;
    for (int n = 0; n < wr; ++n) {
      if (r.stage == tune::Stage::up) {
        w13_row(s, hw, e, n, wrow.data());
      } else {
        w2_row(s, hw, e, n, wrow.data());
      }
      double acc = 0;
      for (int k = 0; k < kr; ++k) acc += x[k] * wrow[k];
      h[n] = acc * route;
    }
    if (fused_act) silu_mul_reference(h.data(), 1, s.N, act_ref.data());
    if (quant_out) {  // rounded to the 16-bit activation, then quantized, as the kernel does
      for (int n = 0; n < s.N; ++n)
        act_ref[n] = half_bits_to_double(act, double_to_half_bits(act, act_ref[n]));
      quant_fp8_group_reference(act_ref.data(), 1, s.N, group, act_q.data(), act_scale.data());
    }
    for (int n = 0; n < no; ++n) {
      ref[i * no + n] = quant_out ? act_q[n] : fused_act ? act_ref[n] : h[n];
      got[i * no + n] = value(slot, n);
    }
  });
  result.rel_error = rows.empty() ? 0.0 : rel_error(got, ref);
  const double limit = error_threshold(s);
  result.ok = std::isfinite(result.rel_error) && result.rel_error <= limit;
  if (!result.ok) {
    result.reason = fmt::format("relative error {:.3e} on {} sampled rows exceeds {:.0e}",
                                result.rel_error, rows.size(), limit);
  }
  return result;
}

}  // namespace moetune::moe
