// CPU reference kernels: reductions (see kernels/cpu/kernels.h for the contract).
//
// Determinism: every output is computed by one thread, reading its inputs in row-major order of the
// reduced dims and accumulating in double. The result is therefore the same bits for any thread
// count and any memory layout of the input; threads split the *outputs*, never one reduction.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "kernels/ops.h"

namespace brigade::cpu {

// out = scale * (sum of x over the dims d with reduced[d] true); reduced has one entry per dim of
// x. out is contiguous and holds one element per kept position, in row-major order (so its shape
// may keep the reduced dims as size 1 or drop them). f32 or f64; out has x's dtype.
void sum(const Tensor& out, const Tensor& x, const std::vector<bool>& reduced, double scale);

// The maximum of x along `dim` and its index (the first one on ties; NaN counts as the maximum),
// laid out like sum's out. x is f32, f64, i32 or i64; values has x's dtype, indices is i64.
// A 0-dim x has no dims: its value is the maximum, at index 0.
void max(const Tensor& values, const Tensor& indices, const Tensor& x, int64_t dim);

// Scatters max's gradient back: grad_x (contiguous, zero-filled, the input's shape) receives
// grad[p] at position indices[p] along `dim`. grad and indices have grad_x's shape with `dim` of
// size 1, any strides; indices are i64 and in range. Any dtype.
void max_backward(const Tensor& grad_x, const Tensor& grad, const Tensor& indices, int64_t dim);

}  // namespace brigade::cpu
