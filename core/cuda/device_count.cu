// How many GPUs this process can use, asked through the CUDA runtime (never the driver API directly,
// so the binary still starts where no driver is installed).
#include <cuda_runtime.h>

#include "core/device.h"

namespace brigade {

int cuda_device_count() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    // cudaErrorNoDevice / cudaErrorInsufficientDriver (no driver at all) mean "no GPU here"; the
    // count is left unwritten in those cases, so don't trust it. Clear the sticky error state.
    cudaGetLastError();
    return 0;
  }
  return count;
}

std::string cuda_unavailable_reason() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err == cudaSuccess) return count > 0 ? "" : "no CUDA device";
  cudaGetLastError();
  return std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
}

}  // namespace brigade
