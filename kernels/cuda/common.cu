// The non-inline parts of kernels/cuda/common.cuh.
#include <atomic>

#include "kernels/cuda/common.cuh"

namespace brigade::cuda {

int sm_count(Device device) {
  // Asked once per device: cudaDeviceGetAttribute is cheap, but launch sizing happens on every op.
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cache[kMaxDevices] = {};
  const int index = device.index;
  if (index >= 0 && index < kMaxDevices) {
    if (const int known = cache[index].load(std::memory_order_relaxed)) return known;
  }
  int count = 0;
  BRIGADE_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, index));
  if (index >= 0 && index < kMaxDevices) cache[index].store(count, std::memory_order_relaxed);
  return count;
}

}  // namespace brigade::cuda
