// Driver-API RAII objects. Destructors never throw: they release in the owning context.
#include "cuda/device.hpp"

#include <utility>

#include "cuda/driver.hpp"
#include "moetune/error.hpp"

namespace moetune::cuda {
namespace {

CUcontext current_context() {
  CUcontext ctx = nullptr;
  MOETUNE_CU(cuCtxGetCurrent, &ctx);
  if (ctx == nullptr) ctx = Context::get(0).handle();  // makes device 0 current
  return ctx;
}

// Pushes ctx for a scope without throwing (destructors); a null ctx pushes nothing.
class QuietPush {
 public:
  explicit QuietPush(CUcontext ctx) : pushed_(ctx != nullptr) {
    if (pushed_) pushed_ = driver().cuCtxPushCurrent(ctx) == CUDA_SUCCESS;
  }
  ~QuietPush() {
    CUcontext popped = nullptr;
    if (pushed_) driver().cuCtxPopCurrent(&popped);
  }

 private:
  bool pushed_;
};

class Push {
 public:
  explicit Push(CUcontext ctx) { MOETUNE_CU(cuCtxPushCurrent, ctx); }
  ~Push() {
    CUcontext popped = nullptr;
    driver().cuCtxPopCurrent(&popped);
  }
};

}  // namespace

// ---- DeviceBuffer ---------------------------------------------------------------------------

DeviceBuffer::DeviceBuffer(std::size_t bytes) : ctx_(current_context()), bytes_(bytes) {
  Push push(ctx_);
  if (bytes_ > 0) MOETUNE_CU(cuMemAlloc, &ptr_, bytes_);
}

DeviceBuffer::DeviceBuffer(const Context& ctx, std::size_t bytes)
    : ctx_(ctx.handle()), bytes_(bytes) {
  Push push(ctx_);
  if (bytes_ > 0) MOETUNE_CU(cuMemAlloc, &ptr_, bytes_);
}

DeviceBuffer::~DeviceBuffer() { release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : ctx_(std::exchange(o.ctx_, nullptr)),
      ptr_(std::exchange(o.ptr_, 0)),
      bytes_(std::exchange(o.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    release();
    ctx_ = std::exchange(o.ctx_, nullptr);
    ptr_ = std::exchange(o.ptr_, 0);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::release() noexcept {
  if (ptr_ != 0) {
    QuietPush push(ctx_);
    driver().cuMemFree(ptr_);
  }
  ptr_ = 0;
  bytes_ = 0;
}

namespace {
void check_range(std::size_t offset, std::size_t bytes, std::size_t size, const char* what) {
  if (offset > size || bytes > size - offset) {
    throw InputError(what, std::to_string(offset) + "+" + std::to_string(bytes),
                     "outside the device buffer of " + std::to_string(size) + " bytes");
  }
}
// The synchronous memset and pageable-upload calls run on the legacy default stream and may return
// before the device is done: a memset of device memory is asynchronous to the host, and a pageable
// upload returns once its bytes are staged (CUDA runtime guide, "API synchronization behavior").
// The legacy stream does not order against cuda::Stream's non-blocking streams either, so a kernel
// launched next could see the old bytes, or a late 0xFF poison land on its outputs (a `moetune
// check` of the decode kernels once reported a third of an output as NaN that way). Waiting for the
// legacy stream makes these calls what their names say.
void wait_legacy_stream() { MOETUNE_CU(cuStreamSynchronize, CU_STREAM_LEGACY); }
}  // namespace

void DeviceBuffer::upload(const void* host, std::size_t bytes, std::size_t offset_bytes) {
  check_range(offset_bytes, bytes, bytes_, "upload");
  Push push(ctx_);
  if (bytes == 0) return;
  MOETUNE_CU(cuMemcpyHtoD, ptr_ + offset_bytes, host, bytes);
  wait_legacy_stream();
}

void DeviceBuffer::download(void* host, std::size_t bytes, std::size_t offset_bytes) const {
  check_range(offset_bytes, bytes, bytes_, "download");
  Push push(ctx_);
  if (bytes > 0) MOETUNE_CU(cuMemcpyDtoH, host, ptr_ + offset_bytes, bytes);
}

void DeviceBuffer::upload_async(const void* host, std::size_t bytes, CUstream stream) {
  check_range(0, bytes, bytes_, "upload");
  Push push(ctx_);
  MOETUNE_CU(cuMemcpyHtoDAsync, ptr_, host, bytes, stream);
}

void DeviceBuffer::download_async(void* host, std::size_t bytes, CUstream stream) const {
  check_range(0, bytes, bytes_, "download");
  Push push(ctx_);
  MOETUNE_CU(cuMemcpyDtoHAsync, host, ptr_, bytes, stream);
}

void DeviceBuffer::fill_u8(std::uint8_t value) {
  Push push(ctx_);
  if (bytes_ == 0) return;
  MOETUNE_CU(cuMemsetD8, ptr_, value, bytes_);
  wait_legacy_stream();
}

void DeviceBuffer::fill_u32(std::uint32_t value) {
  Push push(ctx_);
  if (bytes_ < 4) return;
  MOETUNE_CU(cuMemsetD32, ptr_, value, bytes_ / 4);
  wait_legacy_stream();
}

void DeviceBuffer::fill_u8_async(std::uint8_t value, CUstream stream) {
  Push push(ctx_);
  if (bytes_ > 0) MOETUNE_CU(cuMemsetD8Async, ptr_, value, bytes_, stream);
}

void DeviceBuffer::fill_u32_async(std::uint32_t value, CUstream stream) {
  Push push(ctx_);
  if (bytes_ >= 4) MOETUNE_CU(cuMemsetD32Async, ptr_, value, bytes_ / 4, stream);
}

void DeviceBuffer::copy_from_async(const DeviceBuffer& src, std::size_t bytes, CUstream stream) {
  check_range(0, bytes, bytes_, "copy");
  check_range(0, bytes, src.bytes_, "copy");
  Push push(ctx_);
  MOETUNE_CU(cuMemcpyDtoDAsync, ptr_, src.ptr_, bytes, stream);
}

// ---- PinnedBuffer ---------------------------------------------------------------------------

PinnedBuffer::PinnedBuffer(const Context& ctx, std::size_t bytes)
    : ctx_(ctx.handle()), bytes_(bytes) {
  Push push(ctx_);
  if (bytes_ > 0) MOETUNE_CU(cuMemAllocHost, &data_, bytes_);
}

PinnedBuffer::~PinnedBuffer() { release(); }

PinnedBuffer::PinnedBuffer(PinnedBuffer&& o) noexcept
    : ctx_(std::exchange(o.ctx_, nullptr)),
      data_(std::exchange(o.data_, nullptr)),
      bytes_(std::exchange(o.bytes_, 0)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& o) noexcept {
  if (this != &o) {
    release();
    ctx_ = std::exchange(o.ctx_, nullptr);
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

void PinnedBuffer::release() noexcept {
  if (data_ != nullptr) {
    QuietPush push(ctx_);
    driver().cuMemFreeHost(data_);
  }
  data_ = nullptr;
  bytes_ = 0;
}

// ---- Stream ---------------------------------------------------------------------------------

Stream::Stream() : ctx_(current_context()) {
  Push push(ctx_);
  MOETUNE_CU(cuStreamCreate, &stream_, CU_STREAM_NON_BLOCKING);
}

Stream::Stream(const Context& ctx) : ctx_(ctx.handle()) {
  Push push(ctx_);
  MOETUNE_CU(cuStreamCreate, &stream_, CU_STREAM_NON_BLOCKING);
}

Stream::~Stream() {
  if (stream_ != nullptr) {
    QuietPush push(ctx_);
    driver().cuStreamDestroy(stream_);
  }
}

void Stream::synchronize() const { MOETUNE_CU(cuStreamSynchronize, stream_); }

// ---- Event ----------------------------------------------------------------------------------

Event::Event() : ctx_(current_context()) {
  Push push(ctx_);
  MOETUNE_CU(cuEventCreate, &event_, CU_EVENT_DEFAULT);
}

Event::Event(const Context& ctx) : ctx_(ctx.handle()) {
  Push push(ctx_);
  MOETUNE_CU(cuEventCreate, &event_, CU_EVENT_DEFAULT);
}

Event::~Event() {
  if (event_ != nullptr) {
    QuietPush push(ctx_);
    driver().cuEventDestroy(event_);
  }
}

void Event::record(CUstream stream) const { MOETUNE_CU(cuEventRecord, event_, stream); }
void Event::synchronize() const { MOETUNE_CU(cuEventSynchronize, event_); }

float Event::elapsed_ms(const Event& start, const Event& end) {
  float ms = 0;
  MOETUNE_CU(cuEventElapsedTime, &ms, start.event_, end.event_);
  return ms;
}

// ---- Graph ----------------------------------------------------------------------------------

Graph::~Graph() { release(); }

void Graph::release() noexcept {
  if (exec_ != nullptr || graph_ != nullptr) {
    QuietPush push(ctx_);
    if (exec_ != nullptr) driver().cuGraphExecDestroy(exec_);
    if (graph_ != nullptr) driver().cuGraphDestroy(graph_);
  }
  exec_ = nullptr;
  graph_ = nullptr;
}

void Graph::begin_capture(CUstream stream) {
  release();
  ctx_ = current_context();
  MOETUNE_CU(cuStreamBeginCapture, stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  capturing_ = stream;
}

void Graph::end_capture() {
  if (capturing_ == nullptr) throw CudaError("cuStreamEndCapture: no capture in progress");
  CUstream stream = std::exchange(capturing_, nullptr);
  MOETUNE_CU(cuStreamEndCapture, stream, &graph_);
  MOETUNE_CU(cuGraphInstantiate, &exec_, graph_, 0);
}

void Graph::launch(CUstream stream) const {
  if (exec_ == nullptr) throw CudaError("cuGraphLaunch: graph not instantiated");
  MOETUNE_CU(cuGraphLaunch, exec_, stream);
}

}  // namespace moetune::cuda
