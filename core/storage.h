// Storage: a reference-counted block of bytes on one device. Tensors are views into a Storage, so
// several tensors (a matrix and its transpose, say) can share the same bytes.
//
// Bytes come from the device's Allocator. The CPU allocator hands out 64-byte aligned host memory;
// the CUDA backend plugs a caching allocator in behind the same interface.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/device.h"

namespace brigade {

class Allocator {
 public:
  virtual ~Allocator() = default;
  // Returns memory owning `nbytes` on `device` (never null, even for 0 bytes); throws Error when out
  // of memory.
  virtual std::shared_ptr<void> allocate(size_t nbytes, Device device) = 0;
};

// Host memory held by tensors: what the CPU allocator handed out and has not had back (sizes as
// rounded up to 64 bytes), and the high-water mark since start or reset_host_peak_memory(). The
// CPU's counterpart of cuda_memory_stats (core/stream.h); benchmarks and the pipeline's memory
// report read it.
struct HostMemoryStats {
  size_t allocated = 0;
  size_t peak_allocated = 0;
};
HostMemoryStats host_memory_stats();
void reset_host_peak_memory();  // the peak restarts from what is allocated now

// The allocator for a device; throws when that device's backend is not available.
Allocator& allocator_for(Device device);
// Installs the allocator used for CUDA devices (called once by the CUDA backend at start-up).
void set_cuda_allocator(Allocator* allocator);

class Storage {
 public:
  Storage() = default;
  Storage(size_t nbytes, Device device);

  void* data() const { return data_.get(); }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  bool defined() const { return data_ != nullptr; }
  bool same_as(const Storage& o) const { return data_ == o.data_; }

  // Counts in-place writes (copy_, fill_, add_, optimizer steps). The tape remembers the version of
  // every tensor an op saved for backward and refuses to run that backward if it changed since:
  // silently wrong gradients are worse than an error. Shared by every view of the storage.
  uint64_t version() const { return shared_ ? shared_->version.load(std::memory_order_relaxed) : 0; }
  void bump_version() const {
    if (shared_) shared_->version.fetch_add(1, std::memory_order_relaxed);
  }

  // A host copy of this (device) storage's bytes, as they were when it was filled from the host —
  // Tensor::to keeps one for small integer tensors. Index scans (embedding ids, cross-entropy
  // targets) read it instead of making the host wait for the GPU: inside a pipeline that wait would
  // queue behind communication with other ranks. Valid while version() is what it was then.
  // Returns an undefined Storage when there is none or it is stale.
  Storage host_mirror() const;
  void set_host_mirror(const Storage& host) const;  // records version() with it

 private:
  struct Shared {
    std::atomic<uint64_t> version{0};
    std::shared_ptr<const Storage> mirror;  // written once, before the storage is shared
    uint64_t mirror_version = 0;
  };
  std::shared_ptr<void> data_;
  std::shared_ptr<Shared> shared_;  // one per block of bytes, whichever handle reaches it
  size_t nbytes_ = 0;
  Device device_;
};

}  // namespace brigade
