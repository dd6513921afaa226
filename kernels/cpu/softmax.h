// CPU reference kernels: softmax and log-softmax along one dim (see kernels/cpu/kernels.h).
//
// Each line along `dim` is handled by one thread, subtracting the line's maximum before exp so no
// exp overflows, and summing in double. x, grad_y and y may have any strides; outputs are
// contiguous with x's shape. f32 or f64 (the op layer widens bf16/f16).
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "kernels/ops.h"

namespace brigade::cpu {

// y = exp(x - max) / sum(exp(x - max))
void softmax(const Tensor& y, const Tensor& x, int64_t dim);
// y = (x - max) - log(sum(exp(x - max)))
void log_softmax(const Tensor& y, const Tensor& x, int64_t dim);
// grad_x = y * (grad_y - sum(grad_y * y)), with y = softmax(x)
void softmax_backward(const Tensor& grad_x, const Tensor& grad_y, const Tensor& y, int64_t dim);
// grad_x = grad_y - exp(y) * sum(grad_y), with y = log_softmax(x)
void log_softmax_backward(const Tensor& grad_x, const Tensor& grad_y, const Tensor& y, int64_t dim);

}  // namespace brigade::cpu
