// CUDA kernels: copy — same signatures as kernels/cpu/copy (see kernels/cuda/kernels.h).
#pragma once

#include "core/tensor.h"
#include "kernels/ops.h"

namespace brigade::cuda {

// dst[...] = src[...] converted to dst's dtype, bit for bit as cpu::copy; src broadcasts to dst's
// shape; both on the same GPU; any strides. One launch (or one cudaMemcpyAsync when both are
// contiguous and of one dtype).
void copy(const Tensor& dst, const Tensor& src);
void fill(const Tensor& dst, double value);

}  // namespace brigade::cuda
