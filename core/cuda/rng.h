// Random tensors on a GPU (the CUDA side of core/rng.h): one kernel computes element i from
// (seed, first + i) with the same core/philox.h functions as the CPU loop, so the bits match.
// Plain C++ declarations, callable from .cpp files in a CUDA build.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace brigade::cuda {

// `out` is a contiguous floating-point tensor on a GPU; launched on its device's current stream.
void fill_normal(const Tensor& out, uint64_t seed, uint64_t first);
// Uniform in [low, high): values that round up to `high` in out's dtype are stepped down below it.
void fill_uniform(const Tensor& out, uint64_t seed, uint64_t first, double low, double high);

}  // namespace brigade::cuda
