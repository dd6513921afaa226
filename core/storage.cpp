#include "core/storage.h"

#include <cstdlib>
#include <new>

#include "core/error.h"

namespace brigade {
namespace {

class CpuAllocator final : public Allocator {
 public:
  std::shared_ptr<void> allocate(size_t nbytes, Device /*device: there is one host*/) override {
    // 64-byte alignment: one cache line, and enough for any vector load the kernels use.
    size_t rounded = (nbytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    BRIGADE_CHECK(p != nullptr, "out of memory: the CPU allocator could not provide ", nbytes, " bytes");
    return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
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
