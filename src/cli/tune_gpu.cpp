#include "cli/tune_gpu.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cuda/context.hpp"
#include "cuda/driver.hpp"
#include "cuda/jit.hpp"
#include "cuda/kernel_sources.hpp"
#include "cuda/nvml.hpp"
#include "moetune/error.hpp"
#include "moetune/gpu_spec.hpp"
#include "tune/gpu_evaluator.hpp"

namespace moetune::cli {

tune::TuneResult run_tune_on_gpus(tune::TuneOptions& t, tune::ProgressSink& progress) {
  cuda::require_gpu();
  const int visible = cuda::device_count();
  if (t.gpus > visible) {
    throw InputError("gpus", std::to_string(t.gpus),
                     fmt::format("only {} GPU(s) visible", visible));
  }
  const cuda::DeviceInfo info = cuda::query_device(0);
  if (find_gpu(info.name) == nullptr) {
    throw InputError("gpu", info.name,
                     "not in moetune's spec table (the tuner's floors and limits need it)");
  }
  t.provenance.device_name = info.name;
  const std::string nvml_driver = cuda::nvml_driver_version();
  t.provenance.driver_version =
      nvml_driver.empty() || nvml_driver == "unknown" ? info.driver_version_string() : nvml_driver;
  t.provenance.cuda_version = info.driver_version_string();
  t.provenance.nvrtc_version = cuda::Jit::instance().nvrtc_version();
  t.provenance.kernel_source_hash = std::string(cuda::kernel_source_hash());
  tune::GpuEvaluatorOptions eo;
  eo.seed = t.seed;
  const std::vector<std::string> worker_argv = {"/proc/self/exe", "worker"};
  // Like make_gpu_pool (worker g pins the g-th GPU of CUDA_VISIBLE_DEVICES, or GPU g), plus: the
  // workers share the cores for compiling (MOETUNE_COMPILE_THREADS, read by
  // moe::GemmWorkerBackend).
  const char* visible_env = std::getenv("CUDA_VISIBLE_DEVICES");
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const std::string threads = std::to_string(std::max(2u, cores / static_cast<unsigned>(t.gpus)));
  tune::EvaluatorPool pool;
  for (int g = 0; g < t.gpus; ++g) {
    tune::WorkerOptions w;
    w.argv = worker_argv;
    w.env["CUDA_VISIBLE_DEVICES"] = tune::worker_visible_device(g, visible_env);
    if (t.gpus > 1 && std::getenv("MOETUNE_COMPILE_THREADS") == nullptr)
      w.env["MOETUNE_COMPILE_THREADS"] = threads;
    pool.add(std::make_unique<tune::GpuEvaluator>(t.shape, w, eo));
  }
  return tune::run_tune(t, pool, progress);
}

Commands register_worker(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("worker", "the tuner's measuring process (internal)");
  sub->group("");  // hidden from --help
  return {{sub, [] { return run_gpu_worker(); }}};
}

}  // namespace moetune::cli
