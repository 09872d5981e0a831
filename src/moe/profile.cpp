// `moetune profile` as data: per M, each stage's time against its own floor. See profile.hpp.
#include <algorithm>

#include "moe/bench_data.hpp"
#include "moetune/error.hpp"

namespace moetune::moe {

std::vector<ProfileRow> profile(const FusedMoe& moe, const GpuSpec& gpu, const BenchOptions& opts) {
  const MoeShape& s = moe.shape();
  const Ceilings spec = spec_ceilings(s, gpu);
  std::optional<Ceilings> meas;
  if (opts.measured) meas = opts.measured->for_dtype(s.dtype);
  cuda::Stream stream;
  BenchData d;
  make_bench_weights(moe, opts.seed, d);
  std::vector<ProfileRow> rows;
  for (std::int64_t M : opts.batch) {
    const bench::MeasureOptions mo = prepare_bench_sets(moe, M, opts, d, stream);
    ProfileRow row;
    row.M = M;
    row.up = moe.up_config(M);
    row.down = moe.down_config(M);
    row.rotation = mo.hot ? 1 : mo.rotation;
    double best = -1;
    for (MoeStage st : kAllMoeStages) {
      StageTiming t;
      t.stage = st;
      // The persistent GEMM kernel runs GEMM1, the activation and GEMM2 in the gemm1 stage:
      // their costs together are its floor.
      const bool persistent = moe.uses_persistent_gemms(M);
      // So does the sliced one, with the top-k sum (sums below) as well.
      const bool sliced = moe.uses_sliced_gemms(M);
      // GEMM2 with the top-k sum folded in: the reduce stage's cost is in gemm2's.
      const bool sums = moe.gemm2_sums_topk(M);
      row.sums_topk = sums;
      row.gemm1_aligns = moe.gemm1_aligns(M);
      const bool fused_act = persistent || sliced || gemm1_fuses_act(s, M, row.up);
      StageCost c = stage_cost(s, st, M, true, fused_act);
      if ((persistent || sliced) && st == MoeStage::gemm1) {
        const StageCost c2 = stage_cost(s, MoeStage::gemm2, M, true, fused_act);
        c.bytes += c2.bytes;
        c.flops += c2.flops;
      }
      // Folded, GEMM2 writes no [slots, K] rows (the reduce stage's cost is their read plus the
      // output's write): its bytes lose those rows and gain the output; GEMM1 zeroes the output.
      const double out_bytes = double(M) * s.K * 2;
      if (sums && st == MoeStage::gemm2) {
        const StageCost r = stage_cost(s, MoeStage::reduce, M, true, fused_act);
        const double rows = r.bytes - out_bytes;  // local slots x K x 2
        c.bytes += out_bytes - rows;
      }
      // The sliced kernel deriving the alignment: the routing launch zeroes out (the bench sets
      // carry logits and a separate out), not GEMM1.
      const bool routing_zeroes = sliced && row.gemm1_aligns;
      if (sums && st == MoeStage::gemm1 && !routing_zeroes) c.bytes += out_bytes;
      if (routing_zeroes && st == MoeStage::routing) c.bytes += out_bytes;
      t.bytes = c.bytes;
      t.flops = c.flops;
      t.floor_s = std::max(c.bytes / spec.bandwidth_Bps, c.flops / spec.peak_flops);
      if (meas)
        t.floor_measured_s =
            std::max(c.bytes / meas->bandwidth_Bps, c.flops / meas->peak_flops);
      const bool fused_align = routing_fuses_align(s, M, true);  // the bench sets carry logits
      const bool gemm1_aligns = row.gemm1_aligns;  // GEMM1 derives the tables itself
      const bool fused_quant = routing_fuses_quant(s, true);
      t.runs = !(st == MoeStage::quant && (s.dtype != Dtype::fp8_w8a8 || fused_quant)) &&
               !(st == MoeStage::act && fused_act) &&
               !(st == MoeStage::align && (fused_align || gemm1_aligns)) &&
               !(st == MoeStage::gemm2 && (persistent || sliced)) &&
               !(st == MoeStage::reduce && sums);
      if (persistent && st == MoeStage::gemm1)
        t.note = "includes act and gemm2: the persistent GEMM kernel";
      else if (fused_act && st == MoeStage::gemm1)
        t.note = "includes act: SiLU(gate)*up runs in GEMM1's epilogue";
      if (persistent && st == MoeStage::gemm2) t.note = "in gemm1 (the persistent GEMM kernel)";
      if (sliced && st == MoeStage::gemm1)
        t.note = "includes act, gemm2 and reduce: the sliced GEMM kernel";
      if (sliced && st == MoeStage::gemm2) t.note = "in gemm1 (the sliced GEMM kernel)";
      if (sums && st == MoeStage::gemm2 && !sliced)
        t.note = "includes reduce: GEMM2 adds each slot's row into out (atomics)";
      if (sums && st == MoeStage::reduce) t.note = "fused into gemm2";
      if (sums && st == MoeStage::gemm1 && !routing_zeroes)
        t.note += std::string(t.note.empty() ? "" : "; ") + "zeroes out";
      if (routing_zeroes && st == MoeStage::routing)
        t.note += std::string(t.note.empty() ? "" : "; ") + "zeroes out for the sliced kernel";
      if (fused_act && st == MoeStage::act) t.note = "fused into gemm1";
      if (fused_align && st == MoeStage::routing)
        t.note = "includes align: one block routes and aligns";
      if (fused_align && st == MoeStage::align) t.note = "fused into routing";
      if (gemm1_aligns && st == MoeStage::align) t.note = "in gemm1: its blocks derive it";
      if (gemm1_aligns && st == MoeStage::gemm1)
        t.note += std::string(t.note.empty() ? "" : "; ") + "derives the alignment";
      if (fused_quant && st == MoeStage::routing)
        t.note += std::string(t.note.empty() ? "" : "; ") +
                  "includes quant: spare blocks quantize the hidden states";
      if (fused_quant && st == MoeStage::quant) t.note = "fused into routing";
      if (t.runs) {
        auto fn = [&](CUstream strm, int i) {
          const BenchSet& b = d.sets[i % d.sets.size()];
          moe.enqueue_stage(st, b.inputs, d.weights, reinterpret_cast<void*>(b.out.ptr()),
                            reinterpret_cast<void*>(b.workspace.ptr()), b.workspace.bytes(), strm);
        };
        const bench::Samples smp = bench::measure(fn, mo);
        t.time = smp.summary();
        if (st == MoeStage::gemm1) row.clock = smp.clock;
        if (t.time.median_s > 0) t.pct_of_floor = 100.0 * t.floor_s / t.time.median_s;
        row.stages_sum_s += t.time.median_s;
        if (t.time.median_s > best) {
          best = t.time.median_s;
          row.dominant = st;
        }
      }
      row.stages.push_back(t);
    }
    auto layer = [&](CUstream strm, int i) {
      const BenchSet& b = d.sets[i % d.sets.size()];
      moe.forward(b.inputs, d.weights, reinterpret_cast<void*>(b.out.ptr()),
                  reinterpret_cast<void*>(b.workspace.ptr()), b.workspace.bytes(), strm);
    };
    row.layer = bench::measure(layer, mo).summary();
    row.layer_kernels = moe.layer_kernels(M);
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace moetune::moe
