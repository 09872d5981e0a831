// Shared by the MoE GPU tests: the spec-table entry of GPU 0 (the fallback H200 entry when the
// table does not know it), one layer call's output from a bench set, and the relative difference
// of two bf16 outputs.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
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

inline double bf16_to_double(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// ||a - b|| / ||b|| over two bf16 outputs; *bad when any value is not finite (0xFFFF: poison).
inline double rel_diff(const std::vector<std::uint16_t>& a, const std::vector<std::uint16_t>& b,
                       bool* bad) {
  double num = 0, den = 0;
  *bad = false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double x = bf16_to_double(a[i]), y = bf16_to_double(b[i]);
    if (!std::isfinite(x) || !std::isfinite(y)) *bad = true;
    num += (x - y) * (x - y);
    den += y * y;
  }
  return den > 0 ? std::sqrt(num / den) : (num > 0 ? 1.0 : 0.0);
}

// Which entry point run_layer calls: forward() (the decode kernels where they apply, M <= 4), or
// forward_staged() (the stage kernels at every M).
enum class Entry { kForward, kStaged };

// The layer's output [M, K] (16-bit bits) from forward() on set `set` of `d` into one output
// buffer, poisoned first (0xFF: NaN in bf16 and fp16): one eager call (graph = false), or `calls`
// back-to-back calls captured into a CUDA graph and replayed `replays` times.
inline std::vector<std::uint16_t> run_layer(const FusedMoe& fm, const BenchData& d, bool graph,
                                            cuda::Stream& stream, int calls = 4,
                                            int replays = 2, std::size_t set = 0,
                                            Entry entry = Entry::kForward) {
  const BenchSet& b = d.sets.at(set);
  const std::size_t n = static_cast<std::size_t>(d.M) * fm.shape().K;
  cuda::DeviceBuffer out(n * 2);
  out.fill_u8(0xFF);
  auto call = [&] {
    void* o = reinterpret_cast<void*>(out.ptr());
    void* ws = reinterpret_cast<void*>(b.workspace.ptr());
    if (entry == Entry::kStaged) {
      fm.forward_staged(b.inputs, d.weights, o, ws, b.workspace.bytes(), stream);
    } else {
      fm.forward(b.inputs, d.weights, o, ws, b.workspace.bytes(), stream);
    }
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
