// CUDA kernels: reduce — same signatures as kernels/cpu/reduce (see kernels/cuda/kernels.h).
//
// Deterministic: every output's terms are combined in an order fixed by the shapes alone (no float
// atomics), so repeated runs give the same bits. The order differs from the CPU's, so the two agree
// to rounding, not bitwise.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "kernels/ops.h"

namespace brigade::cuda {

// As cpu::sum; x is f32, f64, bf16 or f16 (16-bit inputs accumulate in f32), out has x's dtype.
void sum(const Tensor& out, const Tensor& x, const std::vector<bool>& reduced, double scale);
// As cpu::max; x is any dtype (bf16/f16 compared in f32, which is exact).
void max(const Tensor& values, const Tensor& indices, const Tensor& x, int64_t dim);
// As cpu::max_backward; any dtype.
void max_backward(const Tensor& grad_x, const Tensor& grad, const Tensor& indices, int64_t dim);

}  // namespace brigade::cuda
