// The roofline floor of one MoE layer call (DESIGN.md's definitions, exactly).
#pragma once
#include <string>
#include <vector>

#include "moetune/gpu_spec.hpp"
#include "moetune/model.hpp"

namespace moetune {

// Hardware ceilings the floor is computed against: the spec sheet's, or measured ones.
struct Ceilings {
  double bandwidth_Bps = 0;  // bytes per second (copy: bytes read + bytes written)
  double peak_flops = 0;     // dense FLOP/s for the shape's dtype
};
// The spec sheet's bandwidth and the dense peak for the shape's dtype (fp8 per-tensor and
// block-wise both use the fp8 peak). InputError("dtype", ...) if the GPU has no such peak.
Ceilings spec_ceilings(const MoeShape& shape, const GpuSpec& gpu);
// Locally measured ceilings (copy bandwidth, MMA rate); InputError unless both are positive.
// The floor over these is DESIGN.md's floor_measured_us.
Ceilings measured_ceilings(double copy_bandwidth_Bps, double mma_flops);

struct RooflineRow {
  int M = 0;
  double expected_experts = 0;  // E * (1 - (1 - topk/E_global)^M)
  double bytes = 0;             // weights of active experts (+ fp8 scales) + M*K*2 in + M*K*2 out
  double flops = 0;             // 6 * M * topk * (E/E_global) * N * K
  double t_mem_us = 0;
  double t_compute_us = 0;
  double floor_us = 0;          // max(t_mem_us, t_compute_us)
  std::string bound;            // "memory" or "compute"
};

// Bytes of one expert's weights: 3*N*K*bytes(dtype) + block fp8 scales.
double expert_weight_bytes(const MoeShape& shape);
// E * (1 - (1 - topk/E_global)^M): expected distinct experts of this rank hit by M tokens.
double expected_active_experts(const MoeShape& shape, int M);
// Throws InputError for M < 1, a non-positive ceiling or an inconsistent shape.
RooflineRow roofline_row(const MoeShape& shape, const Ceilings& c, int M);
std::vector<RooflineRow> roofline(const MoeShape& shape, const Ceilings& c,
                                  const std::vector<int>& batch);
// Smallest M at which the layer is compute-bound (searching M up to 2^24); -1 if never.
int crossover_M(const MoeShape& shape, const Ceilings& c);
// floor / measured time in percent (100 = at the floor), the `pct_floor` of bench records.
double pct_of_floor(const RooflineRow& row, double time_s);

}  // namespace moetune
