// CPU reference kernels: 2-D max and average pooling, NCHW (see kernels/cpu/kernels.h for the
// contract). Like the conv kernels, these take contiguous operands; the op layer makes them so.
// Every (n, c) plane is pooled independently, so the kernels see x as N * C planes of H x W.
#pragma once

#include "core/tensor.h"
#include "kernels/ops.h"

namespace brigade::cpu {

// y and indices [N, C, OH, OW]: the window maximum and its flat position ih * W + iw in the plane
// (the first maximum in row-major window order on ties; a NaN wins, so NaNs propagate).
void max_pool2d(const Tensor& y, const Tensor& indices, const Tensor& x, ops::Pool2dParams p);
// grad_x [N, C, H, W]: each grad_y element added at its recorded argmax.
void max_pool2d_backward(const Tensor& grad_x, const Tensor& grad_y, const Tensor& indices);
// y = window sum / kernel^2: padded positions count as zeros in the divisor (count_include_pad).
void avg_pool2d(const Tensor& y, const Tensor& x, ops::Pool2dParams p);
void avg_pool2d_backward(const Tensor& grad_x, const Tensor& grad_y, ops::Pool2dParams p);

}  // namespace brigade::cpu
