// CPU reference kernels: dropout (see kernels/cpu/kernels.h for the contract).
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "kernels/ops.h"

namespace brigade::cpu {

// out[i] = x[i] / (1 - p) where philox_uniform(seed, offset + i) >= p, else 0, for the flat index i
// of contiguous f32/f64 tensors. The backward is the same call on the gradient: the mask is a pure
// function of (seed, offset + i), so it is recomputed rather than stored.
void dropout(const Tensor& out, const Tensor& x, double p, uint64_t seed, uint64_t offset);

}  // namespace brigade::cpu
