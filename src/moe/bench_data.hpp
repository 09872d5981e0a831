// Device data for timing a FusedMoe (internal to src/moe): random weights and `rotation` routing
// sets (hidden, router logits, workspace, out), each set's workspace filled by one call.
#pragma once
#include <cstdint>
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
// max_set_bytes, never fewer than 1) and runs forward_staged() and forward() once on each, on
// `stream`: every stage's intermediates are in the workspace (the decode kernels write only
// routing and their activation), so stages and the GEMM phase can be timed alone.
void make_bench_sets(const FusedMoe& moe, std::int64_t M, int rotation, std::size_t max_set_bytes,
                     std::uint64_t seed, BenchData& d, CUstream stream);
// make_bench_sets() for M as `opts` asks (one set when hot), synchronized, and the measure options
// that time them: hot also when memory left room for one set only (a single set is L2-warm).
bench::MeasureOptions prepare_bench_sets(const FusedMoe& moe, std::int64_t M,
                                         const BenchOptions& opts, BenchData& d,
                                         cuda::Stream& stream);

}  // namespace moetune::moe
