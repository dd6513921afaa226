// Streams and events: how work is ordered on a GPU.
//
// A Stream is a queue of GPU work; kernels on one stream run in order, kernels on different streams
// may overlap. An Event marks a point in a stream; another stream can wait for it without blocking
// the host. That is all the pipeline needs: each stage runs on its own stream, and a hand-over
// between stages is "record an event on the producer's stream, make the consumer's stream wait".
//
// Every kernel brigade launches goes to the *current stream* of its device for the calling thread
// (current_stream()); StreamGuard changes it for a scope. There is no device-wide synchronisation
// on any hot path.
//
// Both types are cheap shared handles (copies refer to the same CUDA object, destroyed with the last
// handle) and exist in every build: without CUDA or without a GPU, creating one throws an Error that
// says so, and nothing else in the CPU path touches them.
#pragma once

#include <memory>
#include <string>

#include "core/device.h"

namespace brigade {

class Event;

class Stream {
 public:
  Stream() = default;  // undefined; see defined()

  // A new stream on `device` that does not synchronise with the legacy default stream.
  static Stream create(Device device);
  // The stream a thread uses on `device` until a StreamGuard says otherwise: one per device, shared
  // by all threads, created on first use and never destroyed. It is a non-blocking stream of its own,
  // not CUDA's legacy stream 0, so brigade's work never waits on unrelated work queued there.
  static Stream default_for(Device device);

  bool defined() const { return impl_ != nullptr; }
  Device device() const;
  void* raw() const;  // the cudaStream_t, for code that calls CUDA libraries directly

  void synchronize() const;        // blocks the host until the stream's work is done
  bool query() const;              // true when all work queued so far is done
  void wait(const Event& event) const;  // later work on this stream waits for `event` (GPU-side)

  bool operator==(const Stream& o) const { return raw() == o.raw() && device() == o.device(); }
  bool operator!=(const Stream& o) const { return !(*this == o); }

  struct Impl;
  explicit Stream(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

 private:
  std::shared_ptr<Impl> impl_;
};

class Event {
 public:
  Event() = default;
  // timing = true lets elapsed_ms measure between two events (slightly more expensive to record).
  static Event create(Device device, bool timing = false);

  bool defined() const { return impl_ != nullptr; }
  void record(const Stream& stream) const;  // marks the current end of `stream`
  void synchronize() const;                 // blocks the host until the marked work is done
  bool query() const;
  double elapsed_ms(const Event& end) const;  // both created with timing = true and completed
  void* raw() const;                          // the cudaEvent_t

  struct Impl;
  explicit Event(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

 private:
  std::shared_ptr<Impl> impl_;
};

// The calling thread's current stream on `device` (its default stream unless a guard is active).
Stream current_stream(Device device);

// Makes `stream` the current stream of its device for this thread, and its device the current CUDA
// device, until the guard ends (guards nest).
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Device device_;
  Stream previous_;  // the thread's previous choice for device_ (undefined: its default stream)
  int previous_device_ = -1;
};

// Blocks until every stream of `device` is idle. For tests, benchmarks and shutdown — never on a hot
// path.
void device_synchronize(Device device);

// ---- GPU memory (the caching allocator) ----
struct CudaMemoryStats {
  size_t allocated = 0;       // bytes in blocks held by live tensors (sizes as rounded up)
  size_t reserved = 0;        // bytes obtained from cudaMalloc (allocated + cached free blocks)
  size_t peak_allocated = 0;  // high-water mark of `allocated` since start or reset
  size_t cuda_mallocs = 0;    // how many times the allocator had to call cudaMalloc
};
CudaMemoryStats cuda_memory_stats(Device device);
void reset_peak_memory(Device device);
// Returns every cached (unused) block of every device to the driver.
void cuda_empty_cache();
// Caps what this process reserves on `device` (bytes, or a fraction of the device's memory; none()
// lifts it): a request past it first empties the cache, then throws the out-of-memory Error. Every
// thread of the process shares the limit. Without a call, BRIGADE_CUDA_MEMORY_LIMIT (read at the
// first GPU allocation) sets it for every device. `source` names it in errors ("--memory-limit").
struct DeviceMemoryLimit;
void set_cuda_memory_limit(Device device, const DeviceMemoryLimit& limit, const std::string& source = "set_cuda_memory_limit");
size_t cuda_memory_limit(Device device);  // in bytes; 0: none

class Tensor;
// Tells the caching allocator that `t`'s memory is also used by work queued on `stream` (another
// stream than the one it was allocated on). When the memory is freed, it is reused only after that
// stream has finished the work queued on it up to that moment — so the tensor may be dropped as soon
// as the other stream's work on it is queued. Without it, keep the tensor alive until that work is done.
void record_stream(const Tensor& t, const Stream& stream);

}  // namespace brigade
