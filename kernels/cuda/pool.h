// CUDA kernels: pool — the signatures of kernels/cpu/pool, plus the window geometry for max
// backward (see below). f32, f64, bf16 and f16 directly; operands are contiguous NCHW.
#pragma once

#include "core/tensor.h"
#include "kernels/ops.h"

namespace brigade::cuda {

void max_pool2d(const Tensor& y, const Tensor& indices, const Tensor& x, ops::Pool2dParams p);
// Deterministic: each grad_x element gathers, in output order, the grad_y of the windows that cover
// it and name it as their argmax — so unlike the CPU's scatter it needs the window geometry `p`. An
// index that does not name a position of its own window contributes nothing.
void max_pool2d_backward(const Tensor& grad_x, const Tensor& grad_y, const Tensor& indices, ops::Pool2dParams p);
void avg_pool2d(const Tensor& y, const Tensor& x, ops::Pool2dParams p);
void avg_pool2d_backward(const Tensor& grad_x, const Tensor& grad_y, ops::Pool2dParams p);

}  // namespace brigade::cuda
