// Device data for timing a FusedMoe (internal to src/moe): random weights and `rotation` routing
// sets (hidden, router logits, workspace, out), each set's workspace filled by one forward().
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "cuda/device.hpp"
#include "moe/profile.hpp"

namespace moetune::moe {

struct BenchSet {
  cuda::DeviceBuffer hidden, logits, workspace, out;
  MoeInputs inputs;
};

struct BenchData {
  cuda::DeviceBuffer w13, w2, w13_scale, w2_scale, bias;
  MoeWeights weights;
  std::vector<BenchSet> sets;
  std::int64_t M = 0;
  std::size_t workspace_bytes = 0;
};

// Random weights for the FusedMoe's shape (uploaded once; reused across M).
void make_bench_weights(const FusedMoe& moe, std::uint64_t seed, BenchData& d);
// Replaces the routing sets with `rotation` fresh ones for M tokens (fewer when they would pass
// max_set_bytes, never fewer than 1) and runs forward() once on each, on `stream`.
void make_bench_sets(const FusedMoe& moe, std::int64_t M, int rotation, std::size_t max_set_bytes,
                     std::uint64_t seed, BenchData& d, CUstream stream);

// What profile() and layer_bench() share: the shape's ceilings (spec sheet, and measured ones
// when opts has them), a stream, and the weights made once; per M, fresh routing sets.
struct BenchRun {
  BenchRun(const FusedMoe& moe, const GpuSpec& gpu, const BenchOptions& opts);
  // Replaces the routing sets with those for M (opts.rotation of them, 1 if opts.hot), waits for
  // them, and returns opts.measure with hot (also when only one set fitted) and rotation set.
  bench::MeasureOptions sets_for(std::int64_t M);
  // Routing set i (modulo the set count).
  const BenchSet& set(int i) const { return d.sets[i % d.sets.size()]; }
  // The whole layer (forward()) on set i, on `stream`.
  void forward(CUstream stream, int i) const;

  const FusedMoe& moe;
  const BenchOptions& opts;
  Ceilings spec;
  std::optional<Ceilings> meas;
  cuda::Stream stream;
  BenchData d;
};

}  // namespace moetune::moe
