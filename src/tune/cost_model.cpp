// The analytic stage model. Terms (each a named quantity of CostBreakdown):
//   tokens per active expert, padding waste of BLOCK_SIZE_M, tiles vs SMs (waves, last-wave
//   use), bytes actually moved (weights re-read per M-tile unless GROUP_SIZE_M keeps them in L2;
//   A re-read by every N-tile, from L2), split-K fp32 partials, the compute term at the dtype's
//   peak, the bandwidth that the bytes in flight can sustain, and launch overhead.
#include "tune/cost_model.hpp"

#include <algorithm>
#include <cmath>

#include "moetune/roofline.hpp"

namespace moetune::tune {
namespace {

constexpr double kMemLatency_s = 1.0e-6;    // DRAM round trip to cover with bytes in flight
constexpr double kL2BandwidthFactor = 2.5;  // L2 hits cost 1/2.5 of a DRAM byte
constexpr double kLaunch_s = 2.0e-6;        // one kernel launch inside a CUDA graph
constexpr double kSplitKReduce_s = 1.5e-6;  // the split-K reduction pass
constexpr double kTileSetup_s = 0.6e-6;     // prologue/epilogue of one wave of tiles
constexpr double kBaseEfficiency = 0.85;    // what a good kernel reaches of max(mem, compute)
constexpr double kOutputBytes = 2;          // bf16/fp16 outputs

double activation_bytes(Dtype d) { return d == Dtype::fp8_w8a8 ? 1.0 : 2.0; }

}  // namespace

StageDims stage_dims(const MoeShape& shape, Stage stage) {
  if (stage == Stage::up) return {2.0 * shape.N, double(shape.K)};
  return {double(shape.K), double(shape.N)};
}

double max_tokens_per_expert(const MoeShape& shape, int M) {
  const double p = double(shape.topk) / shape.E_global;
  const double mean = M * p;
  return std::max(1.0, std::ceil(mean + 3.0 * std::sqrt(mean * (1 - p))));
}

CostBreakdown predict(const MoeShape& shape, const GpuSpec& gpu, int M, Stage stage,
                      const KernelConfig& c) {
  CostBreakdown b;
  const StageDims d = stage_dims(shape, stage);
  const double wbytes = weight_bytes(shape.dtype);
  const double abytes = activation_bytes(shape.dtype);
  const double BM = c.BLOCK_SIZE_M, BN = c.BLOCK_SIZE_N, BK = c.BLOCK_SIZE_K;
  const double split_k = std::max(1, c.SPLIT_K);

  b.slots = double(M) * shape.topk * shape.E / shape.E_global;
  b.active_experts = std::max(1e-9, expected_active_experts(shape, M));
  b.tokens_per_expert = std::max(1.0, b.slots / b.active_experts);
  b.m_tiles_per_expert = std::ceil(b.tokens_per_expert / BM);
  const double rows_computed = b.active_experts * b.m_tiles_per_expert * BM;
  b.padding_waste = 1.0 - std::min(1.0, b.slots / rows_computed);
  b.n_tiles = std::ceil(d.N_out / BN);
  b.tiles = b.active_experts * b.m_tiles_per_expert * b.n_tiles * split_k;

  // Occupancy: shared memory (per SM ~ per-block opt-in + 1 KiB reserved) and threads.
  const ValidationTarget target{shape.dtype, shape.block_shape, &gpu};
  const double smem = std::max(1, moetune_smem_bytes(c, target));
  const double smem_per_sm = gpu.smem_per_block_bytes + 1024.0;
  const double threads_per_sm =
      gpu.compute_capability() >= 90 || gpu.compute_capability() == 80 ? 2048.0 : 1536.0;
  b.blocks_per_sm =
      std::max(1.0, std::min({std::floor(smem_per_sm / smem),
                              std::floor(threads_per_sm / (32.0 * c.num_warps)), 8.0}));
  const double slots_per_wave = gpu.sm_count * b.blocks_per_sm;
  b.waves = std::ceil(b.tiles / slots_per_wave);
  b.last_wave_use = b.tiles / (b.waves * slots_per_wave);
  const double concurrent = std::min(b.tiles, slots_per_wave);

  // Bytes. Weights: each M-tile of an expert reads its weight tiles; consecutive M-tiles of a
  // group (GROUP_SIZE_M) share them through L2, so DRAM sees ceil(m_tiles / G) reads.
  const double group = std::max(1.0, std::min<double>(c.GROUP_SIZE_M, b.m_tiles_per_expert));
  const double weight_reads = std::ceil(b.m_tiles_per_expert / group);
  double expert_w = d.N_out * d.K_red * wbytes;
  if (shape.block_shape) {
    const auto [bn, bk] = *shape.block_shape;
    expert_w += (d.N_out / bn) * (d.K_red / bk) * 4.0;
  }
  b.weight_bytes = b.active_experts * expert_w * weight_reads;
  const double a_rows = stage == Stage::up ? std::min<double>(M, b.slots) : b.slots;
  const double a_first = a_rows * d.K_red * abytes;
  const double a_rereads = rows_computed * d.K_red * abytes * std::max(0.0, b.n_tiles - 1);
  const double out_bytes = b.slots * d.N_out * kOutputBytes;
  b.activation_bytes = a_first + out_bytes + a_rereads;
  b.split_k_bytes = split_k > 1 ? 2.0 * b.slots * d.N_out * 4.0 * split_k : 0.0;

  // Bandwidth the bytes in flight can sustain: (stages-1) prefetched K-tiles per block.
  const double inflight_per_block =
      std::max(1, c.num_stages - 1) * (BM * abytes + BN * wbytes) * BK;
  b.achieved_bandwidth_Bps =
      std::min(gpu.mem_bandwidth_Bps, concurrent * inflight_per_block / kMemLatency_s);
  // A pipeline shorter than its depth never fills: K-steps per block vs stages.
  const double k_steps = std::max(1.0, std::ceil(d.K_red / (BK * split_k)));
  const double fill = k_steps / (k_steps + std::max(0, c.num_stages - 2));
  b.t_mem_s =
      (b.weight_bytes + a_first + out_bytes + b.split_k_bytes) / b.achieved_bandwidth_Bps / fill +
      a_rereads / (kL2BandwidthFactor * gpu.mem_bandwidth_Bps);

  // Compute: padded rows at the dtype's peak, scaled by how well the tile feeds the MMA units
  // (accumulator per warp; register spills past 128 fp32 per thread) and SM use.
  b.flops = 2.0 * rows_computed * d.N_out * d.K_red;
  const double peak = gpu.peak_flops(shape.dtype).value_or(gpu.bf16_flops);
  const double acc_per_thread = BM * BN / (32.0 * c.num_warps);
  const double warp_tile = BM * BN / c.num_warps;
  double mma_eff = std::min(1.0, std::sqrt(warp_tile / (64.0 * 64.0)));
  if (acc_per_thread > 128) mma_eff *= 128.0 / acc_per_thread;
  const double sm_use =
      std::min(1.0, concurrent / gpu.sm_count) * (b.waves > 1 ? b.last_wave_use : 1.0);
  b.t_compute_s = b.flops / (peak * std::max(0.05, mma_eff) * std::max(1e-3, sm_use));

  b.t_overhead_s = kLaunch_s + (split_k > 1 ? kSplitKReduce_s : 0.0) + b.waves * kTileSetup_s;
  b.predicted_s = std::max(b.t_mem_s, b.t_compute_s) / kBaseEfficiency + b.t_overhead_s;
  return b;
}

double stage_floor_s(const MoeShape& shape, const GpuSpec& gpu, int M, Stage stage) {
  const StageDims d = stage_dims(shape, stage);
  double expert_w = d.N_out * d.K_red * weight_bytes(shape.dtype);
  if (shape.block_shape) {
    const auto [bn, bk] = *shape.block_shape;
    expert_w += (d.N_out / bn) * (d.K_red / bk) * 4.0;
  }
  const double slots = double(M) * shape.topk * shape.E / shape.E_global;
  const double a_rows = stage == Stage::up ? std::min<double>(M, slots) : slots;
  const double bytes = expected_active_experts(shape, M) * expert_w +
                       a_rows * d.K_red * activation_bytes(shape.dtype) +
                       slots * d.N_out * kOutputBytes;
  const double flops = 2.0 * slots * d.N_out * d.K_red;
  const double peak = gpu.peak_flops(shape.dtype).value_or(gpu.bf16_flops);
  return std::max(bytes / gpu.mem_bandwidth_Bps, flops / peak);
}

double measurement_s(double call_s, int replays) {
  const double t = std::max(call_s, 1e-7);
  const double R = std::min(1024.0, std::max(16.0, std::ceil(200e-6 / t / 16.0) * 16.0));
  return (32.0 + 2.0 * R) * t + std::max(0.02, 3.0 * R * t) + double(replays) * R * t +
         kOverheadSPerMeasurement;
}

}  // namespace moetune::tune
