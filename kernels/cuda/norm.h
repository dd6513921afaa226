// CUDA kernels: norm — same signatures as kernels/cpu/norm (see kernels/cuda/kernels.h).
//
// Contiguous [rows, D] data in f32, f64, bf16 or f16 (16-bit data computes in f32); weight, bias and
// the gradients share x's dtype; mean and rstd [rows] are f32 (f64 for f64 data). Deterministic: the
// parameter gradients sum over rows in a fixed two-stage order, without atomics.
#pragma once

#include "core/tensor.h"
#include "kernels/ops.h"

namespace brigade::cuda {

void layer_norm(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& weight,
                const Tensor& bias, double eps);
void rms_norm(const Tensor& y, const Tensor& rstd, const Tensor& x, const Tensor& weight, double eps);
void norm_backward_input(const Tensor& grad_x, const Tensor& grad_y, const Tensor& x, const Tensor& weight,
                         const Tensor& mean, const Tensor& rstd);
void norm_backward_params(const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& grad_y, const Tensor& x,
                          const Tensor& mean, const Tensor& rstd);

}  // namespace brigade::cuda
