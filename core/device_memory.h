// What the CUDA runtime itself says is in use on a device: total minus free from cudaMemGetInfo,
// every cudaMalloc of this process (the caching allocator's blocks, cached ones included) and of the
// runtime (its context, cuBLAS's workspace), plus, on a shared GPU, other processes'. An outside
// measure beside the allocator's own counters (cuda_memory_stats in core/stream.h): a benchmark
// empties the allocator's cache, runs a step, and reads how far the runtime's count rose.
#pragma once

#include <cstddef>

#include "core/device.h"

namespace brigade {

// Bytes in use on `device` by the runtime's count; 0 in a build without CUDA.
size_t cuda_runtime_bytes_in_use(Device device);

}  // namespace brigade
