// An analytic model of one grouped-GEMM stage for (shape, GPU, M, config): used to prune and
// rank before compiling, and to estimate how long a sweep takes. Its absolute numbers are rough;
// its job is ordering (which configs are clearly worse) and the plan's time estimate.
#pragma once
#include "moetune/config.hpp"
#include "moetune/gpu_spec.hpp"
#include "moetune/model.hpp"
#include "moetune/tuner.hpp"

namespace moetune::tune {

struct StageDims {
  double N_out = 0;  // output columns per expert (up: 2N, down: K)
  double K_red = 0;  // reduction length (up: K, down: N)
};
StageDims stage_dims(const MoeShape& shape, Stage stage);

struct CostBreakdown {
  double slots = 0;              // token slots routed to this rank: M * topk * E / E_global
  double active_experts = 0;     // expected experts hit (DESIGN's formula)
  double tokens_per_expert = 0;  // slots / active_experts
  double m_tiles_per_expert = 0; // ceil(tokens_per_expert / BLOCK_SIZE_M)
  double padding_waste = 0;      // share of computed rows that are padding, 0..1
  double n_tiles = 0;
  double tiles = 0;              // blocks launched: experts x M-tiles x N-tiles x SPLIT_K
  double blocks_per_sm = 0;      // occupancy from shared memory and threads
  double waves = 0;
  double last_wave_use = 0;      // share of the last wave's slots that hold a block
  double weight_bytes = 0;       // from DRAM, counting re-reads by M-tiles not grouped
  double activation_bytes = 0;   // A (re-read once per N-tile, mostly from L2) + output
  double split_k_bytes = 0;      // fp32 partials written and read back
  double flops = 0;              // padded rows included (the tensor cores compute them)
  double achieved_bandwidth_Bps = 0;  // limited by bytes in flight (Little's law)
  double t_mem_s = 0, t_compute_s = 0, t_overhead_s = 0;
  double predicted_s = 0;        // max(mem, compute) / efficiency + launch overhead
};

CostBreakdown predict(const MoeShape& shape, const GpuSpec& gpu, int M, Stage stage,
                      const KernelConfig& c);
inline double predicted_time_s(const MoeShape& shape, const GpuSpec& gpu, int M, Stage stage,
                               const KernelConfig& c) {
  return predict(shape, gpu, M, stage, c).predicted_s;
}

// The stage's own floor: its weights of the expected active experts + its activations, over the
// spec bandwidth; its FLOPs over the dtype's peak; the larger.
double stage_floor_s(const MoeShape& shape, const GpuSpec& gpu, int M, Stage stage);

// Largest expected tokens on one expert (mean plus three standard deviations, at least 1):
// decides whether GROUP_SIZE_M can matter.
double max_tokens_per_expert(const MoeShape& shape, int M);

// Sweep cost estimates (seconds) for the plan, fitted to H200 sweeps of the default model
// (bench/results/2026-11-30_h200_tune_sweep.md: 2,364 measurements in 170 s warm; cold 82 s
// more for 591 kernels on 16 cores).
inline constexpr double kCompileSPerConfig = 1.2;  // NVRTC CPU time, one kernel
inline constexpr int kCompileThreads = 8;          // beside measurement (16 cores, 2 per compile)
inline constexpr double kCheckSPerWinner = 0.5;    // fp64 reference check
inline constexpr double kOverheadSPerMeasurement = 0.012;  // request, module, capture, syncs
// Wall time of one measurement of a kernel taking `call_s` per call with `replays` timed
// replays, following bench::measure: R = calls per replay (at least 16, at least 200 µs of work,
// a multiple of 16, at most 1024); two eager probe passes of 16 calls and two first replays; a
// warm-up of max(3 replays, 20 ms); the timed replays; kOverheadSPerMeasurement.
double measurement_s(double call_s, int replays);

}  // namespace moetune::tune
