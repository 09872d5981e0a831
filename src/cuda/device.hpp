// RAII device objects over the driver API: buffers, pinned host memory, streams, events and
// CUDA graphs. Each is made in a context (Context::get(ordinal) or the current one) and freed
// in that same context, so one worker per GPU can own its own.
#pragma once
#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cuda/context.hpp"

namespace moetune::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);  // in the current context
  DeviceBuffer(const Context& ctx, std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  CUdeviceptr ptr() const { return ptr_; }
  template <class T>
  T* as() const {
    return reinterpret_cast<T*>(ptr_);
  }  // device address, for kernel args
  std::size_t bytes() const { return bytes_; }
  bool empty() const { return bytes_ == 0; }

  // Synchronous: upload and the fills are complete on the device when they return (so a kernel
  // on any stream launched after them sees their bytes); download waits for the copy only, not
  // for kernels on non-blocking streams (synchronize the stream that wrote the buffer first).
  void upload(const void* host, std::size_t bytes, std::size_t offset_bytes = 0);
  void download(void* host, std::size_t bytes, std::size_t offset_bytes = 0) const;
  template <class T>
  void upload(const std::vector<T>& host) {
    upload(host.data(), host.size() * sizeof(T));
  }
  template <class T>
  std::vector<T> download_as(std::size_t count) const {
    std::vector<T> v(count);
    download(v.data(), count * sizeof(T));
    return v;
  }
  void upload_async(const void* host, std::size_t bytes, CUstream stream);
  void download_async(void* host, std::size_t bytes, CUstream stream) const;
  // Poisoning / zeroing: every byte set to `value` (D8) or every 32-bit word (D32).
  void fill_u8(std::uint8_t value);
  void fill_u32(std::uint32_t value);
  void fill_u8_async(std::uint8_t value, CUstream stream);
  void fill_u32_async(std::uint32_t value, CUstream stream);
  // Device-to-device copy of `bytes` from `src` into this buffer, on `stream`.
  void copy_from_async(const DeviceBuffer& src, std::size_t bytes, CUstream stream);

 private:
  void release() noexcept;
  CUcontext ctx_ = nullptr;
  CUdeviceptr ptr_ = 0;
  std::size_t bytes_ = 0;
};

// A new buffer in the current context holding `host`, uploaded synchronously; an empty vector
// gives an empty buffer (no allocation).
template <class T>
DeviceBuffer to_device(const std::vector<T>& host) {
  if (host.empty()) return {};
  DeviceBuffer b(host.size() * sizeof(T));
  b.upload(host);
  return b;
}

// Page-locked host memory (fast, async copies).
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(const Context& ctx, std::size_t bytes);
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& o) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void release() noexcept;
  CUcontext ctx_ = nullptr;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

class Stream {
 public:
  Stream();  // non-blocking stream in the current context
  explicit Stream(const Context& ctx);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  CUstream handle() const { return stream_; }
  operator CUstream() const { return stream_; }  // NOLINT: passes where a CUstream is taken
  void synchronize() const;

 private:
  CUcontext ctx_ = nullptr;
  CUstream stream_ = nullptr;
};

class Event {
 public:
  Event();  // timing event in the current context
  explicit Event(const Context& ctx);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  CUevent handle() const { return event_; }
  void record(CUstream stream) const;
  void synchronize() const;
  // Milliseconds between two recorded, completed events (the driver's resolution ~0.5 µs).
  static float elapsed_ms(const Event& start, const Event& end);

 private:
  CUcontext ctx_ = nullptr;
  CUevent event_ = nullptr;
};

// A captured and instantiated CUDA graph: begin_capture(stream), enqueue work on that stream,
// end_capture(), then launch(stream) as often as needed.
class Graph {
 public:
  Graph() = default;
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  void begin_capture(CUstream stream);
  void end_capture();  // ends the capture and instantiates the graph
  void launch(CUstream stream) const;
  bool ready() const { return exec_ != nullptr; }

 private:
  void release() noexcept;
  CUcontext ctx_ = nullptr;
  CUstream capturing_ = nullptr;
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
};

}  // namespace moetune::cuda
