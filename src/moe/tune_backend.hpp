// The tuner's GPU side (src/tune/gpu_evaluator.hpp): a tune::WorkerBackend that times and
// checks one grouped-GEMM stage (up = GEMM1 with w13, down = GEMM2 with w2) for a candidate
// config, run inside `moetune worker` (one process per GPU).
//
// measure(): per shape, random weights are made once (w13 for up, w2 for down; fp8 with random
// block or per-tensor scales), copied on the device until they exceed twice the L2 when they are
// smaller; per (M, BLOCK_SIZE_M), `rotation` routing sets (uniform random top-k ids, distinct per
// token, aligned on the host with align_reference and uploaded) are made once and reused by every
// config; the inputs (up: hidden [M, K]; down: the intermediate [M*topk, N], fp8 codes plus
// scales for fp8) are random. bench::measure replays a CUDA graph of launch_gemm calls, call i on
// routing set i % rotation (hot: set 0). GEMM1 runs the epilogue the layer runs for that config
// (gemm::gemm1_stage); for block fp8 at the sizes where a config can fuse the activation, an
// unfused candidate is timed with the activation stage (silu_mul_quant) after it, so fused and
// unfused candidates are both timed up to GEMM2's input.
// check(): one launch on fresh random inputs into a poisoned output, against the fp64 reference
// of that GEMM on >= 256 sampled output rows (every row when fewer), NaN/inf anywhere fails; a
// fused block-fp8 GEMM1 against the quantized fp64 SiLU(gate)·up (dequantized on both sides).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "moe/reference.hpp"
#include "moetune/model.hpp"
#include "tune/gpu_evaluator.hpp"

namespace moetune::moe {

// One routing set for M tokens on rank 0 (host side).
struct RoutingSet {
  std::vector<std::int32_t> topk_ids;  // [M, topk]: uniform over E_global, distinct per token
  std::vector<float> topk_weights;     // [M, topk] in [0.05, 1)
  Alignment alignment;                 // align_reference(topk_ids, M, topk, E, 0, BLOCK_SIZE_M)
};
// The ids and weights depend on (E_global, topk, M, seed) only, so configs with different
// BLOCK_SIZE_M are timed on the same routing. InputError when M < 1, BLOCK_SIZE_M < 1 or topk is
// not in [1, E_global].
RoutingSet make_routing_set(const MoeShape& shape, std::int64_t M, int BLOCK_SIZE_M,
                            std::uint64_t seed);

// Output rows the check compares for M*topk slots: all of them up to 256, else a sample of 256.
inline constexpr std::int64_t kCheckRows = 256;

class GemmWorkerBackend : public tune::WorkerBackend {
 public:
  // Touches no GPU: the device is opened on the first request (GpuUnavailable then, one line).
  GemmWorkerBackend();
  ~GemmWorkerBackend() override;
  GemmWorkerBackend(const GemmWorkerBackend&) = delete;
  GemmWorkerBackend& operator=(const GemmWorkerBackend&) = delete;

  // {name, sm, sms, l2_bytes, driver, cuda, nvrtc, kernel_source_hash}.
  nlohmann::json hello() override;
  // Starts compiling the configs' kernels in the background (Jit::compile_many_async on
  // $MOETUNE_COMPILE_THREADS threads, default every core) and
  // answers at once: "ok" for each, "pruned" for a config the kernel cannot run on the shape.
  // M > 0: only the GEMM1 epilogue that M runs with each config (gemm::gemm1_stage); M = 0:
  // both for a config that fuses at decode sizes.
  std::vector<tune::MeasureReply> compile(const MoeShape& shape, tune::Stage stage,
                                          const std::vector<KernelConfig>& configs,
                                          int M) override;
  // Waits for this config's build (compile_failed with the log's first line when it fails), then
  // times it. A CudaError from a launch is launch_failed (and context_lost() tells whether the
  // context survived it).
  tune::MeasureReply measure(const tune::MeasureRequest& r) override;
  tune::CheckResult check(const tune::CheckRequest& r) override;

  // True once a CUDA error left the context unusable: every later request would fail, so the
  // process that hosts this backend should end instead of answering (the parent then records
  // the candidate as launch_failed and starts a fresh worker).
  bool context_lost() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace moetune::moe
