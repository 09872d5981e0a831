#include "cli/tune_gpu.hpp"

#include <fmt/format.h>

#include <cstdlib>

#include "cuda/context.hpp"
#include "cuda/driver.hpp"
#include "cuda/jit.hpp"
#include "cuda/kernel_sources.hpp"
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
  t.provenance.driver_version = info.driver_version_string();
  t.provenance.cuda_version = info.driver_version_string();
  t.provenance.nvrtc_version = cuda::Jit::instance().nvrtc_version();
  t.provenance.kernel_source_hash = std::string(cuda::kernel_source_hash());
  tune::GpuEvaluatorOptions eo;
  eo.seed = t.seed;
  tune::EvaluatorPool pool = tune::make_gpu_pool(t.shape, t.gpus, {"/proc/self/exe", "worker"}, eo);
  return tune::run_tune(t, pool, progress);
}

Commands register_worker(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("worker", "the tuner's measuring process (internal)");
  sub->group("");  // hidden from --help
  return {{sub, [] { return run_gpu_worker(); }}};
}

}  // namespace moetune::cli
