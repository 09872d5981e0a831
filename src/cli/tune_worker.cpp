// The GPU side of `moetune worker` (the tuner's measuring process, src/tune/gpu_evaluator.hpp):
// moe::GemmWorkerBackend (src/moe/tune_backend.hpp) times one grouped-GEMM stage per request over
// rotating routing sets and checks winners against the fp64 GEMM reference. A CUDA fault leaves
// the context unusable: the worker then ends without answering, so the parent records that very
// candidate as launch_failed and starts a fresh worker for the next one.
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "cli/tune_gpu.hpp"
#include "moe/tune_backend.hpp"
#include "moetune/error.hpp"
#include "tune/gpu_evaluator.hpp"

namespace moetune::cli {
namespace {

class ExitOnLostContext : public tune::WorkerBackend {
 public:
  explicit ExitOnLostContext(moe::GemmWorkerBackend& inner) : inner_(inner) {}
  nlohmann::json hello() override { return inner_.hello(); }
  std::vector<tune::MeasureReply> compile(const MoeShape& shape, tune::Stage stage,
                                          const std::vector<KernelConfig>& configs,
                                          int M) override {
    return inner_.compile(shape, stage, configs, M);
  }
  tune::MeasureReply measure(const tune::MeasureRequest& r) override {
    tune::MeasureReply reply = inner_.measure(r);
    if (inner_.context_lost()) lost("M=" + std::to_string(r.M) + ": " + reply.reason);
    return reply;
  }
  tune::CheckResult check(const tune::CheckRequest& r) override {
    tune::CheckResult result = inner_.check(r);
    if (inner_.context_lost()) lost("check M=" + std::to_string(r.M) + ": " + result.reason);
    return result;
  }

 private:
  [[noreturn]] static void lost(const std::string& what) {
    std::fprintf(stderr, "moetune worker: CUDA context lost (%s); exiting\n", what.c_str());
    std::fflush(stderr);
    std::_Exit(kExitInternal);
  }
  moe::GemmWorkerBackend& inner_;
};

}  // namespace

int run_gpu_worker() {
  moe::GemmWorkerBackend backend;
  ExitOnLostContext guarded(backend);
  return tune::run_worker(std::cin, std::cout, guarded);
}

}  // namespace moetune::cli
