// Host memory per owner: which pipeline rank holds how many bytes, when several ranks are threads of
// one process (`brigade train --stages P` without a launcher) and the process-wide counters of
// host_memory_stats() (core/storage.h) cannot tell them apart.
//
//   auto account = std::make_shared<HostMemoryAccount>();
//   HostMemoryScope scope(account);  // this thread's CPU allocations are charged to `account`
//   ... account->allocated(), account->peak() ...
//
// A block is charged to the account of the thread that allocated it, and stays charged until it is
// freed, whichever thread frees it: a tensor handed to another rank in memory (the local
// communicator passes tensors without copying) counts for the rank that made it. parallel_for's
// workers charge the account of the thread that called it. Sizes are as the CPU allocator rounds
// them (64 bytes). Thread-safe: relaxed atomics, read after the work they count.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <memory>

namespace brigade {

class HostMemoryAccount {
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

// The account this thread's allocations are charged to; null when none (the usual case).
const std::shared_ptr<HostMemoryAccount>& current_host_memory_account();

// Charges this thread's allocations to `account` (null: to none) until destroyed; nests.
class HostMemoryScope {
 public:
  explicit HostMemoryScope(std::shared_ptr<HostMemoryAccount> account);
  ~HostMemoryScope();
  HostMemoryScope(const HostMemoryScope&) = delete;
  HostMemoryScope& operator=(const HostMemoryScope&) = delete;

 private:
  std::shared_ptr<HostMemoryAccount> previous_;
};

}  // namespace brigade
