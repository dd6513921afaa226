// Memory per owner: which pipeline rank holds how many bytes, when several ranks are threads of one
// process (`brigade train --stages P` without a launcher) and the process-wide counters
// (host_memory_stats() in core/storage.h, cuda_memory_stats() in core/stream.h) cannot tell them apart.
//
//   auto host = std::make_shared<MemoryAccount>(), device = std::make_shared<MemoryAccount>();
//   HostMemoryScope on_host(host);        // this thread's CPU allocations are charged to `host`
//   DeviceMemoryScope on_device(device);  // its GPU allocations (the CUDA caching allocator) to `device`
//   ... host->peak(), device->peak() ...
//
// The allocators look up the calling thread's account when they hand out a block and keep it with the
// block: it stays charged to that account until freed, whichever thread frees it, so a tensor handed
// to another rank in memory (the local communicator passes tensors without copying) counts for the
// rank that made it. Sizes are as each allocator rounds them: 64 bytes on the host (core/storage.cpp);
// on a GPU 512 bytes, or 2 MiB from 1 MiB on (core/cuda/caching_allocator.h), and a cached block
// reused for a smaller request counts at its own size. Cached (free) GPU blocks are nobody's.
// parallel_for's workers charge the host account of the thread that called it. Thread-safe: relaxed
// atomics, read after the work they count.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <utility>

namespace brigade {

class MemoryAccount {
 public:
  size_t allocated() const { return allocated_.load(std::memory_order_relaxed); }
  size_t peak() const { return peak_.load(std::memory_order_relaxed); }
  void reset_peak() { peak_.store(allocated(), std::memory_order_relaxed); }  // restart from now
  // A second high-water mark for a shorter span inside the first (one pipeline action, say), so that
  // timing actions does not restart the peak of the whole step.
  size_t window_peak() const { return window_peak_.load(std::memory_order_relaxed); }
  void begin_window() { window_peak_.store(allocated(), std::memory_order_relaxed); }

  void charge(size_t bytes) {
    const size_t now = allocated_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    raise(peak_, now);
    raise(window_peak_, now);
  }
  void release(size_t bytes) { allocated_.fetch_sub(bytes, std::memory_order_relaxed); }

 private:
  static void raise(std::atomic<size_t>& peak, size_t now) {
    size_t seen = peak.load(std::memory_order_relaxed);
    while (now > seen && !peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
    }
  }
  std::atomic<size_t> allocated_{0}, peak_{0}, window_peak_{0};
};

// Which memory an account counts: each kind has its own account per thread.
enum class MemoryKind { host, device };

// The account this thread's allocations of `kind` are charged to; null when none (the usual case).
const std::shared_ptr<MemoryAccount>& current_memory_account(MemoryKind kind);

// Charges this thread's allocations of `kind` to `account` (null: to none) until destroyed; nests.
class MemoryAccountScope {
 public:
  MemoryAccountScope(MemoryKind kind, std::shared_ptr<MemoryAccount> account);
  ~MemoryAccountScope();
  MemoryAccountScope(const MemoryAccountScope&) = delete;
  MemoryAccountScope& operator=(const MemoryAccountScope&) = delete;

 private:
  MemoryKind kind_;
  std::shared_ptr<MemoryAccount> previous_;
};

// The two kinds by name: the rank's CPU allocations, and its GPU allocations.
class HostMemoryScope : public MemoryAccountScope {
 public:
  explicit HostMemoryScope(std::shared_ptr<MemoryAccount> account)
      : MemoryAccountScope(MemoryKind::host, std::move(account)) {}
};
class DeviceMemoryScope : public MemoryAccountScope {
 public:
  explicit DeviceMemoryScope(std::shared_ptr<MemoryAccount> account)
      : MemoryAccountScope(MemoryKind::device, std::move(account)) {}
};

}  // namespace brigade
