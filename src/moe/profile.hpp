// `moetune profile` and `moetune bench` as data (no printing):
//  - profile: per M, the time of each stage (routing, align, quant, GEMM1, act, GEMM2, reduce)
//    measured with src/bench's measure() (CUDA graph; cold: rotating routing sets), each stage's
//    own floor (its bytes / bandwidth, its FLOPs / peak) and which stage dominates;
//  - layer_bench: the whole layer and "the GEMM phase" per M (median, 95% CI, p10/p90), GB/s,
//    TFLOP/s and % of the roofline floor (spec sheet, and measured ceilings when given);
//  - compare: `bench --vs`, per M faster / slower / within noise from the CI of the time ratio.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench/ceilings.hpp"
#include "bench/measure.hpp"
#include "moetune/fused_moe.hpp"
#include "moetune/roofline.hpp"
#include "moetune/stats.hpp"

namespace moetune::moe {

struct BenchOptions {
  std::vector<std::int64_t> batch = {1, 8, 64, 256, 1024, 4096};
  bool hot = false;              // one routing set (cache-resident) instead of rotating ones
  int rotation = 16;             // routing sets in cold mode (fewer only if memory is short)
  std::size_t max_set_bytes = std::size_t(24) << 30;  // device memory for the rotating sets
  bench::MeasureOptions measure; // hot/rotation are filled in from the fields above
  std::optional<bench::MeasuredCeilings> measured;  // for floor_measured_us
  std::uint64_t seed = 1;
};

// One stage at one M.
struct StageTiming {
  MoeStage stage = MoeStage::routing;
  Summary time;                 // seconds per call
  double bytes = 0;             // the fewest bytes the stage must move
  double flops = 0;
  double floor_s = 0;           // max(bytes / bandwidth, flops / peak), spec-sheet ceilings
  double floor_measured_s = 0;  // the same over measured ceilings (0 = none given)
  double pct_of_floor = 0;      // 100 * floor_s / median
  bool runs = true;             // false: nothing to do for this dtype/input (bf16 quant; bf16/
                                // fp16 act, which runs inside gemm1)
  std::string note;             // e.g. gemm1 includes the activation (gemm1_fuses_act)
};

struct ProfileRow {
  std::int64_t M = 0;
  KernelConfig up, down;
  std::vector<StageTiming> stages;  // in pipeline order
  MoeStage dominant = MoeStage::gemm1;  // the stage with the largest median
  double stages_sum_s = 0;          // Σ medians
  Summary layer;                    // forward() as one call, for comparison with the sum
  std::string layer_kernels;        // FusedMoe::layer_kernels(M): what forward() ran
  bool sums_topk = false;           // GEMM2 added the top-k sum into out (FusedMoe::gemm2_sums_topk)
  bool gemm1_aligns = false;        // GEMM1 derived the alignment (FusedMoe::gemm1_aligns)
  bench::ClockLog clock;
  int rotation = 1;
};

std::vector<ProfileRow> profile(const FusedMoe& moe, const GpuSpec& gpu, const BenchOptions& opts);

struct LayerBenchRow {
  std::int64_t M = 0;
  KernelConfig up, down;
  bool hot = false;
  int rotation = 1;
  std::string layer_kernels;              // FusedMoe::layer_kernels(M): what forward() ran
  Summary layer, gemm_phase;              // seconds per call
  std::vector<double> layer_s, gemm_phase_s;  // the kept per-replay samples (for compare)
  RooflineRow roofline;                   // spec-sheet floor of the layer
  double floor_measured_us = 0;           // over measured ceilings (0 = none given)
  double layer_GBps = 0, layer_TFLOPs = 0;  // roofline bytes / median, flops / median
  double pct_floor = 0;                   // 100 * floor / median (layer)
  double pct_floor_measured = 0;
  double gemm_phase_pct_floor = 0;        // the same floor against the GEMM phase's median
  bench::ClockLog clock;
};

std::vector<LayerBenchRow> layer_bench(const FusedMoe& moe, const GpuSpec& gpu,
                                       const BenchOptions& opts);

// `bench --vs`: a against b, per M present in both (layer and GEMM phase).
struct LayerComparison {
  std::int64_t M = 0;
  Comparison layer;
  Comparison gemm_phase;
};
std::vector<LayerComparison> compare(const std::vector<LayerBenchRow>& a,
                                     const std::vector<LayerBenchRow>& b);

// The bytes and FLOPs of each stage for M tokens (expected active experts under uniform
// routing), the model behind StageTiming's floors; gemm1_fused_act: GEMM1 writes the activation
// itself (gemm1_fuses_act). No GPU.
struct StageCost {
  double bytes = 0;
  double flops = 0;
};
StageCost stage_cost(const MoeShape& shape, MoeStage stage, std::int64_t M, bool router_logits,
                     bool gemm1_fused_act);

}  // namespace moetune::moe
