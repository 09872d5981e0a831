// Eager timing, graph capture and back-to-back timed replays on one stream.
#include "bench/graph_replay.hpp"

#include "cuda/context.hpp"
#include "cuda/nvml.hpp"
#include "moetune/error.hpp"

namespace moetune::bench {

GraphReplay::GraphReplay(EnqueueFn enqueue, int device)
    : enqueue_(std::move(enqueue)),
      ctx_(device >= 0 ? &cuda::Context::get(device) : &cuda::Context::current()) {
  ctx_->make_current();
  pci_bus_id_ = cuda::query_device(ctx_->ordinal()).pci_bus_id;
  stream_ = std::make_unique<cuda::Stream>(*ctx_);
}

double GraphReplay::time_eager(const std::vector<int>& call_indices) {
  cuda::Event start(*ctx_), end(*ctx_);
  start.record(*stream_);
  for (int i : call_indices) enqueue_(*stream_, i);
  end.record(*stream_);
  end.synchronize();
  return cuda::Event::elapsed_ms(start, end) * 1e-3;
}

void GraphReplay::capture(const std::vector<int>& call_indices) {
  stream_->synchronize();
  graph_ = std::make_unique<cuda::Graph>();
  graph_->begin_capture(*stream_);
  try {
    for (int i : call_indices) enqueue_(*stream_, i);
  } catch (...) {
    try {
      graph_->end_capture();  // leave the stream out of capture mode
    } catch (...) {
    }
    graph_.reset();
    throw;
  }
  graph_->end_capture();
}

std::vector<double> GraphReplay::replay(int count, double* clock_mhz) {
  if (!graph_) throw CudaError("GraphReplay::replay: no graph captured");
  while (static_cast<int>(events_.size()) < count + 1) {
    events_.push_back(std::make_unique<cuda::Event>(*ctx_));
  }
  events_[0]->record(*stream_);
  for (int i = 0; i < count; ++i) {
    graph_->launch(*stream_);
    events_[i + 1]->record(*stream_);
  }
  // Read the clock while the batch runs: after the first replay has finished at the latest.
  if (clock_mhz != nullptr) {
    events_[1]->synchronize();
    *clock_mhz = cuda::nvml_sm_clock_mhz(pci_bus_id_);
  }
  events_[count]->synchronize();
  std::vector<double> times(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    times[i] = cuda::Event::elapsed_ms(*events_[i], *events_[i + 1]) * 1e-3;
  }
  return times;
}

double GraphReplay::default_clock_mhz() {
  cuda::Clocks c = cuda::nvml_clocks(pci_bus_id_);
  return c.sm_default_mhz > 0 ? c.sm_default_mhz : c.sm_max_mhz;  // no app clocks: the max
}

}  // namespace moetune::bench
