// Shared by the MoE GPU tests: the spec-table entry of GPU 0 (the fallback H200 entry when the
// table does not know it), and one layer call's output from a bench set.
#pragma once
#include <cstdint>
#include <vector>

#include "cuda/device.hpp"
#include "moe/bench_data.hpp"
#include "moetune/fused_moe.hpp"
#include "moetune/gpu_spec.hpp"

namespace moetune::moe::testing {

inline const GpuSpec& local_gpu() {
  const cuda::DeviceInfo info = cuda::query_device(0);
  if (const GpuSpec* g = find_gpu(info.name)) return *g;
  return require_gpu(kFallbackGpu);
}

// The layer's output [M, K] (16-bit bits) from forward() on set `set` of `d` into one output
// buffer, poisoned first (0xFF: NaN in bf16 and fp16): one eager call (graph = false), or `calls`
// back-to-back calls captured into a CUDA graph and replayed `replays` times.
inline std::vector<std::uint16_t> run_layer(const FusedMoe& fm, const BenchData& d, bool graph,
                                            cuda::Stream& stream, int calls = 4,
                                            int replays = 2, std::size_t set = 0) {
  const BenchSet& b = d.sets.at(set);
  const std::size_t n = static_cast<std::size_t>(d.M) * fm.shape().K;
  cuda::DeviceBuffer out(n * 2);
  out.fill_u8(0xFF);
  auto call = [&] {
    fm.forward(b.inputs, d.weights, reinterpret_cast<void*>(out.ptr()),
               reinterpret_cast<void*>(b.workspace.ptr()), b.workspace.bytes(), stream);
  };
  if (graph) {
    cuda::Graph g;
    g.begin_capture(stream);
    for (int i = 0; i < calls; ++i) call();
    g.end_capture();
    for (int r = 0; r < replays; ++r) g.launch(stream);
  } else {
    call();
  }
  stream.synchronize();
  return out.download_as<std::uint16_t>(n);
}

}  // namespace moetune::moe::testing
