// The CUDA ReplayDevice: eager calls and CUDA-graph replays of an EnqueueFn on its own stream,
// timed with events; the SM clock from NVML while a batch runs.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "bench/measure.hpp"
#include "cuda/device.hpp"

namespace moetune::bench {

class GraphReplay : public ReplayDevice {
 public:
  // Uses Context::get(device) (or the current context when device < 0).
  GraphReplay(EnqueueFn enqueue, int device = -1);
  double time_eager(const std::vector<int>& call_indices) override;
  void capture(const std::vector<int>& call_indices) override;
  std::vector<double> replay(int count, double* clock_mhz) override;
  double default_clock_mhz() override;
  CUstream stream() const { return stream_->handle(); }

 private:
  EnqueueFn enqueue_;
  cuda::Context* ctx_;
  std::string pci_bus_id_;
  std::unique_ptr<cuda::Stream> stream_;
  std::unique_ptr<cuda::Graph> graph_;
  std::vector<std::unique_ptr<cuda::Event>> events_;  // boundaries of back-to-back replays
};

}  // namespace moetune::bench
