// CUDA kernels: softmax — same signatures as kernels/cpu/softmax (see kernels/cuda/kernels.h).
//
// f32, f64, bf16 and f16 directly (16-bit data computes in f32). Inputs may have any strides;
// outputs are whatever view the op layer passes (contiguous in practice). Each line along `dim` is
// owned by one warp, one block or one thread, so its sums run in a fixed order: deterministic.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "kernels/ops.h"

namespace brigade::cuda {

void softmax(const Tensor& y, const Tensor& x, int64_t dim);
void log_softmax(const Tensor& y, const Tensor& x, int64_t dim);
void softmax_backward(const Tensor& grad_x, const Tensor& grad_y, const Tensor& y, int64_t dim);
void log_softmax_backward(const Tensor& grad_x, const Tensor& grad_y, const Tensor& y, int64_t dim);

}  // namespace brigade::cuda
