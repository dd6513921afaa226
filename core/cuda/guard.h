// Small helpers every CUDA-side file of core/ uses: "is this device a usable GPU?" and a scoped
// cudaSetDevice. (CUDA-only .cpp/.cu files.)
#pragma once

#include <cuda_runtime.h>

#include "core/cuda/check.h"
#include "core/device.h"

namespace brigade::cuda {

// The number of GPUs, asked once (it cannot change while the process runs).
inline int device_count() {
  static const int count = cuda_device_count();
  return count;
}

// Throws unless `device` is a GPU this process can use: "op: cuda:1 is not available (this machine
// has 1 GPU)" — the error a user sees instead of a CUDA code when the device is wrong or absent.
inline void check_gpu(const char* op, Device device) {
  BRIGADE_CHECK(device.is_cuda(), op, ": ", device.str(), " is not a GPU");
  BRIGADE_CHECK(device.index >= 0 && device.index < device_count(), op, ": ", device.str(),
                " is not available (this machine has ", device_count(), device_count() == 1 ? " GPU" : " GPUs",
                device_count() == 0 ? ", or no CUDA driver" : "", ")");
}

// Makes `index` the current CUDA device for the scope, restoring the previous one afterwards.
class DeviceGuard {
 public:
  explicit DeviceGuard(int index) {
    BRIGADE_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != index) BRIGADE_CUDA_CHECK(cudaSetDevice(index));
    else previous_ = -1;  // nothing to restore
  }
  ~DeviceGuard() {
    if (previous_ >= 0) cudaSetDevice(previous_);  // cannot throw here; it was current a moment ago
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace brigade::cuda
