// Streams and events (core/stream.h) on the CUDA runtime.
#include "core/stream.h"

#include <cuda_runtime.h>

#include <memory>
#include <mutex>
#include <vector>

#include "core/cuda/check.h"
#include "core/cuda/current.h"
#include "core/cuda/guard.h"

namespace brigade {

namespace {

// CUDA streams are recycled, never destroyed. The caching allocator keeps the raw handle of every
// stream that used a block (record_stream) and records an event on it when the block is freed,
// which can be long after the Stream that made it is gone: a pipeline rank's stream ends with its
// thread, while tensors it touched live on. A destroyed handle there is an invalid resource (the
// CPU emulator caught exactly this at the end of `brigade train --device cuda`), or, worse, a
// handle the runtime has reused. So a dead Stream's handle goes back to a per-device pool for the
// next Stream::create, as PyTorch's stream pool does. Reuse is safe: anything recorded on the
// handle before stays ordered before what its next owner queues.
struct StreamPool {
  std::mutex mutex;
  std::vector<std::vector<cudaStream_t>> idle;  // by device
};

StreamPool& stream_pool() {
  static auto* pool = new StreamPool;  // leaked on purpose: streams may be returned during exit
  return *pool;
}

cudaStream_t take_stream(Device device) {
  StreamPool& pool = stream_pool();
  {
    std::lock_guard<std::mutex> lock(pool.mutex);
    if (pool.idle.size() > size_t(device.index) && !pool.idle[size_t(device.index)].empty()) {
      cudaStream_t s = pool.idle[size_t(device.index)].back();
      pool.idle[size_t(device.index)].pop_back();
      return s;
    }
  }
  cuda::DeviceGuard guard(device.index);
  cudaStream_t s = nullptr;
  // Non-blocking: no implicit synchronisation with the legacy default stream (stream 0).
  BRIGADE_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return s;
}

void return_stream(Device device, cudaStream_t s) {
  StreamPool& pool = stream_pool();
  std::lock_guard<std::mutex> lock(pool.mutex);
  if (pool.idle.size() <= size_t(device.index)) pool.idle.resize(size_t(device.index) + 1);
  pool.idle[size_t(device.index)].push_back(s);
}

}  // namespace

struct Stream::Impl {
  cudaStream_t stream = nullptr;
  Device device;
  ~Impl() {
    // Work still queued on the stream completes normally; the handle is reused, never destroyed.
    if (stream != nullptr) return_stream(device, stream);
  }
};

struct Event::Impl {
  cudaEvent_t event = nullptr;
  Device device;
  bool timing = false;
  ~Impl() {
    if (event != nullptr) cudaEventDestroy(event);
  }
};

namespace {

// The handles a thread is using, indexed by device: its StreamGuard choice (undefined: none), and
// a copy of each device's default stream so the hot path does not take the global lock.
struct ThreadStreams {
  std::vector<Stream> chosen;
  std::vector<Stream> defaults;
};

ThreadStreams& thread_streams() {
  thread_local ThreadStreams streams;
  if (streams.chosen.empty()) {
    streams.chosen.resize(size_t(cuda::device_count()));
    streams.defaults.resize(size_t(cuda::device_count()));
  }
  return streams;
}

const Stream::Impl& stream_impl(const std::shared_ptr<Stream::Impl>& impl, const char* what) {
  BRIGADE_CHECK(impl != nullptr, what, ": the stream is undefined");
  return *impl;
}

const Event::Impl& event_impl(const std::shared_ptr<Event::Impl>& impl, const char* what) {
  BRIGADE_CHECK(impl != nullptr, what, ": the event is undefined");
  return *impl;
}

}  // namespace

// ---- Stream ----

Stream Stream::create(Device device) {
  cuda::check_gpu("Stream::create", device);
  auto impl = std::make_shared<Impl>();
  impl->device = device;
  impl->stream = take_stream(device);
  return Stream(std::move(impl));
}

Stream Stream::default_for(Device device) {
  cuda::check_gpu("Stream::default_for", device);
  ThreadStreams& mine = thread_streams();
  Stream& cached = mine.defaults[size_t(device.index)];
  if (!cached.defined()) {
    // Leaked on purpose: threads may still use these streams while static destructors run at exit.
    static std::mutex mutex;
    static auto* streams = new std::vector<Stream>(size_t(cuda::device_count()));
    std::lock_guard<std::mutex> lock(mutex);
    Stream& shared = (*streams)[size_t(device.index)];
    if (!shared.defined()) shared = create(device);
    cached = shared;
  }
  return cached;
}

Device Stream::device() const { return stream_impl(impl_, "Stream::device").device; }
void* Stream::raw() const { return stream_impl(impl_, "Stream::raw").stream; }

void Stream::synchronize() const { BRIGADE_CUDA_CHECK(cudaStreamSynchronize(stream_impl(impl_, "Stream::synchronize").stream)); }

bool Stream::query() const {
  cudaError_t err = cudaStreamQuery(stream_impl(impl_, "Stream::query").stream);
  if (err == cudaErrorNotReady) return false;
  BRIGADE_CUDA_CHECK(err);
  return true;
}

void Stream::wait(const Event& event) const {
  const Impl& s = stream_impl(impl_, "Stream::wait");
  BRIGADE_CHECK(event.defined(), "Stream::wait: the event is undefined");
  // Works across devices: the GPU of this stream waits for the event's GPU; the host never blocks.
  BRIGADE_CUDA_CHECK(cudaStreamWaitEvent(s.stream, static_cast<cudaEvent_t>(event.raw()), 0));
}

// ---- Event ----

Event Event::create(Device device, bool timing) {
  cuda::check_gpu("Event::create", device);
  auto impl = std::make_shared<Impl>();
  impl->device = device;
  impl->timing = timing;
  cuda::DeviceGuard guard(device.index);
  // Timing makes every record also write a timestamp; events used only for ordering skip it.
  BRIGADE_CUDA_CHECK(cudaEventCreateWithFlags(&impl->event, timing ? cudaEventDefault : cudaEventDisableTiming));
  return Event(std::move(impl));
}

void Event::record(const Stream& stream) const {
  const Impl& e = event_impl(impl_, "Event::record");
  BRIGADE_CHECK(stream.defined(), "Event::record: the stream is undefined");
  // CUDA requires an event and the stream it is recorded on to belong to the same device.
  BRIGADE_CHECK(stream.device() == e.device, "Event::record: the event belongs to ", e.device.str(),
                " but the stream to ", stream.device().str());
  cuda::DeviceGuard guard(e.device.index);
  BRIGADE_CUDA_CHECK(cudaEventRecord(e.event, static_cast<cudaStream_t>(stream.raw())));
}

void Event::synchronize() const { BRIGADE_CUDA_CHECK(cudaEventSynchronize(event_impl(impl_, "Event::synchronize").event)); }

bool Event::query() const {
  cudaError_t err = cudaEventQuery(event_impl(impl_, "Event::query").event);
  if (err == cudaErrorNotReady) return false;
  BRIGADE_CUDA_CHECK(err);
  return true;
}

double Event::elapsed_ms(const Event& end) const {
  const Impl& start = event_impl(impl_, "Event::elapsed_ms");
  const Impl& stop = event_impl(end.impl_, "Event::elapsed_ms");
  BRIGADE_CHECK(start.timing && stop.timing, "Event::elapsed_ms: both events must be created with timing = true");
  float ms = 0;
  BRIGADE_CUDA_CHECK(cudaEventElapsedTime(&ms, start.event, stop.event));
  return double(ms);
}

void* Event::raw() const { return event_impl(impl_, "Event::raw").event; }

// ---- the current stream ----

Stream current_stream(Device device) {
  cuda::check_gpu("current_stream", device);
  const Stream& chosen = thread_streams().chosen[size_t(device.index)];
  return chosen.defined() ? chosen : Stream::default_for(device);
}

StreamGuard::StreamGuard(const Stream& stream) {
  BRIGADE_CHECK(stream.defined(), "StreamGuard: the stream is undefined");
  device_ = stream.device();
  Stream& slot = thread_streams().chosen[size_t(device_.index)];
  BRIGADE_CUDA_CHECK(cudaGetDevice(&previous_device_));
  BRIGADE_CUDA_CHECK(cudaSetDevice(device_.index));
  previous_ = slot;
  slot = stream;
}

StreamGuard::~StreamGuard() {
  thread_streams().chosen[size_t(device_.index)] = previous_;
  cudaSetDevice(previous_device_);  // cannot throw here; it was the current device a moment ago
}

void device_synchronize(Device device) {
  cuda::check_gpu("device_synchronize", device);
  cuda::DeviceGuard guard(device.index);
  BRIGADE_CUDA_CHECK(cudaDeviceSynchronize());
}

namespace cuda {

cudaStream_t stream_for(Device device) {
  cudaStream_t stream = static_cast<cudaStream_t>(current_stream(device).raw());
  int current = -1;
  BRIGADE_CUDA_CHECK(cudaGetDevice(&current));
  if (current != device.index) BRIGADE_CUDA_CHECK(cudaSetDevice(device.index));
  return stream;
}

cudaStream_t stream_for(const Tensor& t) {
  BRIGADE_CHECK(t.defined(), "stream_for: the tensor is undefined");
  return stream_for(t.device());
}

}  // namespace cuda
}  // namespace brigade
