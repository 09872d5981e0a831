// The GPU side of `moetune worker` (the tuner's measuring process, src/tune/gpu_evaluator.hpp):
// one GEMM stage of a FusedMoe, timed with src/bench's measure() over rotating routing sets;
// a winner's check compares its layer output with that of moetune's default configs (which
// `moetune check` holds to the fp64 reference) on the same inputs. A CUDA error during a launch
// ends the process: the context is lost, and the parent records the candidate and restarts it.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>

#include "bench/measure.hpp"
#include "cli/tune_gpu.hpp"
#include "cuda/context.hpp"
#include "cuda/device.hpp"
#include "cuda/jit.hpp"
#include "cuda/kernel_sources.hpp"
#include "gemm/gemm.hpp"
#include "moe/bench_data.hpp"
#include "moe/check.hpp"
#include "moe/reference.hpp"
#include "moetune/error.hpp"
#include "moetune/fused_moe.hpp"
#include "tune/gpu_evaluator.hpp"

namespace moetune::cli {
namespace {

[[noreturn]] void lost(const std::string& what) {
  std::fprintf(stderr, "moetune worker: %s\n", what.c_str());
  std::fflush(stderr);
  std::_Exit(kExitInternal);
}

class GpuWorkerBackend : public tune::WorkerBackend {
 public:
  GpuWorkerBackend() : ctx_(cuda::Context::get(0)), info_(cuda::query_device(0)) {
    const GpuSpec* known = find_gpu(info_.name);
    if (known == nullptr) {
      throw InputError("gpu", info_.name, "not in moetune's spec table; cannot tune here");
    }
    gpu_ = *known;
  }

  nlohmann::json hello() override {
    return {{"name", info_.name},
            {"sm", info_.arch()},
            {"sms", info_.sm_count},
            {"driver", info_.driver_version_string()},
            {"cuda", info_.driver_version_string()},
            {"nvrtc", cuda::Jit::instance().nvrtc_version()},
            {"kernel_source_hash", std::string(cuda::kernel_source_hash())}};
  }

  std::vector<tune::MeasureReply> compile(const MoeShape& shape, tune::Stage stage,
                                          const std::vector<KernelConfig>& configs) override {
    std::vector<tune::MeasureReply> out(configs.size());
    std::vector<cuda::KernelSpec> specs;
    std::vector<std::size_t> at;
    for (std::size_t i = 0; i < configs.size(); ++i) {
      try {
        specs.push_back(gemm::gemm_kernel_spec(shape, configs[i], gemm_stage(stage), info_.arch()));
        at.push_back(i);
      } catch (const InputError& e) {
        out[i].status = tune::CandidateStatus::pruned;
        out[i].reason = e.what();
      }
    }
    std::vector<cuda::CompiledKernel> done = cuda::Jit::instance().compile_many(specs);
    for (std::size_t j = 0; j < done.size(); ++j) {
      tune::MeasureReply& r = out[at[j]];
      r.compile_s = done[j].compile_s;
      if (done[j].cubin.empty()) {
        r.status = tune::CandidateStatus::compile_failed;
        r.reason = done[j].log.substr(0, 500);
      }
    }
    return out;
  }

  tune::MeasureReply measure(const tune::MeasureRequest& r) override {
    tune::MeasureReply reply;
    std::optional<FusedMoe> moe;
    try {
      moe.emplace(make_moe(r.shape, r.M, r.stage, r.config));
    } catch (const InputError& e) {
      reply.status = tune::CandidateStatus::pruned;
      reply.reason = e.what();
      return reply;
    }
    const auto t0 = std::chrono::steady_clock::now();
    try {
      moe->prepare(r.M);
    } catch (const CudaError& e) {
      reply.status = tune::CandidateStatus::compile_failed;
      reply.reason = e.what();
      return reply;
    }
    reply.compile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    try {
      ensure_weights(*moe);
      moe::make_bench_sets(*moe, r.M, r.hot ? 1 : r.rotation, kMaxSetBytes, r.seed + r.M, data_,
                           stream_);
      stream_.synchronize();
      bench::MeasureOptions mo;
      mo.rotation = static_cast<int>(data_.sets.size());
      mo.hot = r.hot || data_.sets.size() < 2;
      mo.min_replays = mo.max_replays = std::max(1, r.replays);
      mo.device = 0;
      const MoeStage stage = r.stage == tune::Stage::up ? MoeStage::gemm1 : MoeStage::gemm2;
      const FusedMoe& m = *moe;
      auto fn = [&](CUstream st, int i) {
        const moe::BenchSet& b = data_.sets[i % data_.sets.size()];
        m.enqueue_stage(stage, b.inputs, data_.weights, reinterpret_cast<void*>(b.out.ptr()),
                        reinterpret_cast<void*>(b.workspace.ptr()), b.workspace.bytes(), st);
      };
      const bench::Samples s = bench::measure(fn, mo);
      reply.times_s = s.kept_s();
      reply.measure_s = s.wall_s;
      reply.clock = {{"default_mhz", s.clock.default_mhz},
                     {"median_mhz", s.clock.median_mhz},
                     {"min_mhz", s.clock.min_mhz},
                     {"throttled", s.clock.throttled}};
    } catch (const CudaError& e) {
      lost(fmt::format("M={} {}: {}", r.M, tune::to_string(r.stage), e.what()));
    }
    return reply;
  }

  tune::CheckResult check(const tune::CheckRequest& r) override {
    tune::CheckResult result;
    try {
      FusedMoe moe = make_moe(r.shape, r.M, r.stage, r.config);
      FusedMoe ref(r.shape, gpu_);  // moetune's default configs
      moe.prepare(r.M);
      ref.prepare(r.M);
      ensure_weights(moe);
      moe::make_bench_sets(moe, r.M, 1, kMaxSetBytes, r.seed + 7919 * r.M, data_, stream_);
      const moe::BenchSet& b = data_.sets.at(0);
      const std::size_t ws = ref.workspace_bytes(r.M);
      cuda::DeviceBuffer ref_ws(ws), ref_out(b.out.bytes());
      FusedMoe::init_workspace(reinterpret_cast<void*>(ref_ws.ptr()), ws, stream_);
      moe.forward(b.inputs, data_.weights, reinterpret_cast<void*>(b.out.ptr()),
                  reinterpret_cast<void*>(b.workspace.ptr()), b.workspace.bytes(), stream_);
      ref.forward(b.inputs, data_.weights, reinterpret_cast<void*>(ref_out.ptr()),
                  reinterpret_cast<void*>(ref_ws.ptr()), ws, stream_);
      stream_.synchronize();
      const std::size_t n = b.out.bytes() / 2;
      std::vector<std::uint16_t> got(n), want(n);
      b.out.download(got.data(), n * 2);
      ref_out.download(want.data(), n * 2);
      const Dtype act = r.shape.dtype == Dtype::fp16 ? Dtype::fp16 : Dtype::bf16;
      double diff = 0, norm = 0;
      bool finite = true;
      for (std::size_t i = 0; i < n; ++i) {
        const double g = moe::half_bits_to_double(act, got[i]);
        const double w = moe::half_bits_to_double(act, want[i]);
        finite = finite && std::isfinite(g);
        diff += (g - w) * (g - w);
        norm += w * w;
      }
      result.rel_error = norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
      const double limit = moe::error_threshold(r.shape);
      result.ok = finite && result.rel_error <= limit;
      if (!finite) {
        result.reason = "output holds NaN or inf";
      } else if (!result.ok) {
        result.reason = fmt::format(
            "relative error {:.3e} against the default configs' output "
            "exceeds {:.0e}",
            result.rel_error, limit);
      }
    } catch (const InputError& e) {
      result.ok = false;
      result.reason = e.what();
    } catch (const CudaError& e) {
      lost(fmt::format("check M={}: {}", r.M, e.what()));
    }
    return result;
  }

 private:
  static constexpr std::size_t kMaxSetBytes = std::size_t(8) << 30;

  static gemm::GemmStage gemm_stage(tune::Stage s) {
    return s == tune::Stage::up ? gemm::GemmStage::up : gemm::GemmStage::down;
  }

  // A FusedMoe running `config` for the measured stage; the other stage runs moetune's default
  // with the same BLOCK_SIZE_M (one alignment serves both), else the same config.
  FusedMoe make_moe(const MoeShape& shape, int M, tune::Stage stage, const KernelConfig& config) {
    const bool up = stage == tune::Stage::up;
    KernelConfig partner = moetune_default_config(shape, gpu_, M, /*down=*/up);
    partner.BLOCK_SIZE_M = config.BLOCK_SIZE_M;
    for (const KernelConfig& other : {partner, config}) {
      ConfigTable up_table{{M, up ? config : other}};
      ConfigTable down_table{{M, up ? other : config}};
      try {
        FusedMoe::check(shape, gpu_, up_table, down_table);
      } catch (const InputError&) {
        continue;
      }
      return FusedMoe(shape, gpu_, up_table, down_table);
    }
    ConfigTable up_table{{M, up ? config : partner}};
    ConfigTable down_table{{M, up ? partner : config}};
    return FusedMoe(shape, gpu_, up_table, down_table);  // throws InputError naming the problem
  }

  void ensure_weights(const FusedMoe& moe) {
    const std::string key = tune::shape_to_wire(moe.shape()).dump();
    if (key == weights_key_) return;
    data_ = moe::BenchData{};
    moe::make_bench_weights(moe, 1, data_);
    weights_key_ = key;
  }

  cuda::Context& ctx_;
  cuda::DeviceInfo info_;
  GpuSpec gpu_;
  cuda::Stream stream_;
  moe::BenchData data_;
  std::string weights_key_;
};

}  // namespace

int run_gpu_worker() {
  GpuWorkerBackend backend;
  return tune::run_worker(std::cin, std::cout, backend);
}

}  // namespace moetune::cli
