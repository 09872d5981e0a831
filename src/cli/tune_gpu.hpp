// The GPU side of `moetune tune`: one evaluator (a restartable worker process) per GPU, and the
// hidden `worker` subcommand those processes run.
#pragma once
#include "cli/commands.hpp"
#include "moetune/tuner.hpp"

namespace moetune::cli {

// Runs the sweep on t.gpus local GPUs. Throws GpuUnavailable without a GPU.
tune::TuneResult run_tune_on_gpus(tune::TuneOptions& t, tune::ProgressSink& progress);

// The hidden `worker` subcommand (not listed in --help).
Commands register_worker(CLI::App& app);

// Serves the worker protocol on stdin/stdout with the GPU backend (tune_worker.cpp).
int run_gpu_worker();

}  // namespace moetune::cli
