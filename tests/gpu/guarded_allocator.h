// A CUDA allocator for tests that makes out-of-bounds writes and unwritten outputs visible.
//
// It wraps the real allocator. Every block it hands out is laid out as
//
//     [ front guard | payload (the bytes asked for) | back guard ]
//
// The guards are filled with a known byte; the payload with 0xFF bytes, which read as NaN in every
// floating dtype (and -1 in integer ones). When the block is freed — and whenever a test asks — the
// guards are copied back and checked: a kernel that wrote one element past either end of its output
// has changed them. A kernel that forgot to write an output element leaves a NaN, which the
// comparison (compare.h) rejects. Real out-of-bounds *reads* are compute-sanitizer's job.
//
// Problems are collected, not thrown: a free happens inside a destructor, where throwing is not an
// option. Tests call take_problems() at the end of each case.
//
// Under compute-sanitizer, set BRIGADE_TEST_EXACT_ALLOCATIONS=1: every block is then its own
// cudaMalloc of exactly the requested size (still poisoned, no guards), so memcheck sees the true end
// of every tensor — inside the caching allocator's larger blocks an overrun is not out of bounds.
#pragma once

#if BRIGADE_HAVE_CUDA

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/cuda/check.h"
#include "core/storage.h"
#include "core/stream.h"

namespace gpu_test {

class GuardedAllocator final : public brigade::Allocator {
 public:
  // 256 bytes keep the payload at cudaMalloc's alignment, which vectorised kernels may rely on; the
  // back guard starts right after the last requested byte, so even a 1-byte overrun is seen.
  static constexpr size_t kGuardBytes = 256;
  static constexpr unsigned char kGuardByte = 0xA5;
  static constexpr unsigned char kPoisonByte = 0xFF;

  explicit GuardedAllocator(brigade::Allocator& inner) : inner_(inner) {
    const char* exact = std::getenv("BRIGADE_TEST_EXACT_ALLOCATIONS");
    exact_ = exact != nullptr && std::string(exact) == "1";
  }

  std::shared_ptr<void> allocate(size_t nbytes, brigade::Device device) override {
    // Fill on the stream the op will use (the current one), so the fills land before its kernels.
    auto stream = static_cast<cudaStream_t>(brigade::current_stream(device).raw());
    if (exact_) return allocate_exact(nbytes, stream);

    std::shared_ptr<void> block = inner_.allocate(nbytes + 2 * kGuardBytes, device);
    auto* base = static_cast<unsigned char*>(block.get());
    unsigned char* payload = base + kGuardBytes;
    note(cudaMemsetAsync(base, kGuardByte, kGuardBytes, stream), "cudaMemsetAsync(front guard)");
    note(cudaMemsetAsync(payload, kPoisonByte, nbytes, stream), "cudaMemsetAsync(poison)");
    note(cudaMemsetAsync(payload + nbytes, kGuardByte, kGuardBytes, stream), "cudaMemsetAsync(back guard)");
    {
      std::lock_guard<std::mutex> lock(mutex_);
      live_[payload] = nbytes;
    }
    return std::shared_ptr<void>(payload, [this, block, nbytes](void* p) mutable {
      check_guards(static_cast<unsigned char*>(p), nbytes, "when freed");
      {
        std::lock_guard<std::mutex> lock(mutex_);
        live_.erase(p);
      }
      block.reset();  // back to the real allocator
    });
  }

  // Checks the guards of every block still in use (for the end of a test case).
  void check_live_blocks() {
    std::map<void*, size_t> live;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      live = live_;
    }
    for (auto& [p, n] : live) check_guards(static_cast<unsigned char*>(p), n, "while live");
  }

  // Everything found wrong since the last call (empty when all is well).
  std::vector<std::string> take_problems() {
    std::lock_guard<std::mutex> lock(mutex_);
    return std::exchange(problems_, {});
  }

  brigade::Allocator& inner() { return inner_; }
  bool exact() const { return exact_; }  // BRIGADE_TEST_EXACT_ALLOCATIONS=1: no guards to check

 private:
  // A block of its own, exactly nbytes long (at least 1: a Storage is never null). cudaFree waits for
  // the device, so no kernel can still be using the block when it goes.
  std::shared_ptr<void> allocate_exact(size_t nbytes, cudaStream_t stream) {
    void* p = nullptr;
    BRIGADE_CUDA_CHECK(cudaMalloc(&p, nbytes == 0 ? 1 : nbytes));
    note(cudaMemsetAsync(p, kPoisonByte, nbytes, stream), "cudaMemsetAsync(poison)");
    return std::shared_ptr<void>(p, [](void* q) { cudaFree(q); });
  }

  void check_guards(unsigned char* payload, size_t nbytes, const char* when) {
    // A free can come while kernels that use the block are still queued on some stream; tests are
    // allowed to be slow, so wait for the whole device before reading the guards.
    if (!note(cudaDeviceSynchronize(), "cudaDeviceSynchronize")) return;
    std::vector<unsigned char> front(kGuardBytes), back(kGuardBytes);
    if (!note(cudaMemcpy(front.data(), payload - kGuardBytes, kGuardBytes, cudaMemcpyDeviceToHost), "cudaMemcpy") ||
        !note(cudaMemcpy(back.data(), payload + nbytes, kGuardBytes, cudaMemcpyDeviceToHost), "cudaMemcpy"))
      return;
    // Reports the first changed byte of a guard, as an offset from the start of the payload.
    auto report = [&](const std::vector<unsigned char>& guard, int64_t first_offset, const char* side) {
      for (size_t i = 0; i < guard.size(); ++i) {
        if (guard[i] == kGuardByte) continue;
        add_problem("out-of-bounds write at byte " + std::to_string(first_offset + int64_t(i)) + " of a " +
                    std::to_string(nbytes) + "-byte block (" + side + " guard; found " + when + ")");
        return;
      }
    };
    report(front, -int64_t(kGuardBytes), "front");
    report(back, int64_t(nbytes), "back");
  }

  bool note(cudaError_t err, const char* what) {
    if (err == cudaSuccess) return true;
    add_problem(std::string("guarded allocator: ") + what + " failed: " + cudaGetErrorString(err));
    return false;
  }

  void add_problem(std::string text) {
    std::lock_guard<std::mutex> lock(mutex_);
    problems_.push_back(std::move(text));
  }

  brigade::Allocator& inner_;
  bool exact_ = false;
  std::mutex mutex_;
  std::map<void*, size_t> live_;
  std::vector<std::string> problems_;
};

// The process's guarded allocator, installed in front of the real CUDA allocator on first use and
// never removed (blocks it handed out may outlive any test case).
inline GuardedAllocator& guarded_allocator() {
  static GuardedAllocator* guarded = [] {
    auto* g = new GuardedAllocator(brigade::allocator_for(brigade::Device::cuda(0)));
    brigade::set_cuda_allocator(g);
    return g;
  }();
  return *guarded;
}

}  // namespace gpu_test

#endif  // BRIGADE_HAVE_CUDA
