#include "core/storage.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <new>

#include "core/error.h"
#include "core/host_memory.h"

namespace brigade {
namespace {

// Relaxed atomics: the counts are statistics, read after the work they describe has been joined.
std::atomic<size_t> g_host_allocated{0}, g_host_peak{0};

void raise_host_peak(size_t now) {
  size_t peak = g_host_peak.load(std::memory_order_relaxed);
  while (now > peak && !g_host_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

class CpuAllocator final : public Allocator {
 public:
  std::shared_ptr<void> allocate(size_t nbytes, Device /*device: there is one host*/) override {
    // 64-byte alignment: one cache line, and enough for any vector load the kernels use.
    const size_t rounded = std::max<size_t>((nbytes + 63) / 64 * 64, 64);
    void* p = std::aligned_alloc(64, rounded);
    BRIGADE_CHECK(p != nullptr, "out of memory: the CPU allocator could not provide ", nbytes, " bytes");
    raise_host_peak(g_host_allocated.fetch_add(rounded, std::memory_order_relaxed) + rounded);
    std::shared_ptr<HostMemoryAccount> account = current_host_memory_account();  // the owner's, if any
    if (account) account->charge(rounded);
    return std::shared_ptr<void>(p, [rounded, account = std::move(account)](void* q) {
      std::free(q);
      g_host_allocated.fetch_sub(rounded, std::memory_order_relaxed);
      if (account) account->release(rounded);
    });
  }
};

Allocator* g_cuda_allocator = nullptr;

}  // namespace

Allocator& allocator_for(Device device) {
  static CpuAllocator cpu;
  if (device.is_cpu()) return cpu;
  BRIGADE_CHECK(g_cuda_allocator != nullptr, "device ", device.str(),
                " is not available: brigade was built without CUDA or no GPU is present");
  return *g_cuda_allocator;
}

void set_cuda_allocator(Allocator* allocator) { g_cuda_allocator = allocator; }

HostMemoryStats host_memory_stats() {
  return {g_host_allocated.load(std::memory_order_relaxed), g_host_peak.load(std::memory_order_relaxed)};
}

void reset_host_peak_memory() { g_host_peak.store(g_host_allocated.load(std::memory_order_relaxed), std::memory_order_relaxed); }

Storage::Storage(size_t nbytes, Device device)
    : data_(allocator_for(device).allocate(nbytes, device)),
      shared_(std::make_shared<Shared>()),
      nbytes_(nbytes),
      device_(device) {}

Storage Storage::host_mirror() const {
  if (!shared_ || !shared_->mirror || shared_->mirror_version != version()) return Storage();
  return *shared_->mirror;
}

void Storage::set_host_mirror(const Storage& host) const {
  BRIGADE_CHECK(shared_ && host.device().is_cpu() && host.nbytes() == nbytes_,
                "Storage::set_host_mirror: needs a host block of the same size (", host.nbytes(), " vs ", nbytes_,
                " bytes)");
  shared_->mirror = std::make_shared<const Storage>(host);
  shared_->mirror_version = version();
}

}  // namespace brigade
