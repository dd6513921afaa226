// CUDA kernels: dropout — same signature as kernels/cpu/dropout (see kernels/cuda/kernels.h).
//
// Contiguous f32, f64, bf16 or f16 (16-bit data computes in f32). The mask is the CPU's, bit for bit:
// element i is kept iff philox::uniform(seed, offset + i) >= p (core/philox.h runs the same code on
// both devices), and kept values are scaled exactly as the CPU scales them.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "kernels/ops.h"

namespace brigade::cuda {

void dropout(const Tensor& out, const Tensor& x, double p, uint64_t seed, uint64_t offset);

}  // namespace brigade::cuda
