#include "cli/tune_gpu.hpp"

#include <stdexcept>

#include "cuda/driver.hpp"

namespace moetune::cli {

tune::TuneResult run_tune_on_gpus(tune::TuneOptions& t, tune::ProgressSink& progress) {
  (void)t, (void)progress;
  cuda::require_gpu();
  throw std::runtime_error("this build has no GPU evaluator for the tuner yet");
}

Commands register_worker(CLI::App& app) {
  (void)app;
  return {};
}

}  // namespace moetune::cli
