// The raw stream kernels launch on (CUDA translation units only).
#pragma once

#include <cuda_runtime.h>

#include "core/tensor.h"

namespace brigade::cuda {

// The calling thread's current stream on the device `t` lives on (see core/stream.h); also makes
// that device the current CUDA device.
cudaStream_t stream_for(const Tensor& t);
cudaStream_t stream_for(Device device);

}  // namespace brigade::cuda
