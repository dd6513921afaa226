// CPU reference kernels: normalisation over the last dim (see kernels/cpu/kernels.h for the contract).
//
// Every tensor here is contiguous (the op layer makes it so) and x is seen as [rows, D]. Every tensor,
// the per-row mean and rstd [rows] included, has the compute dtype (f32 or f64): f64 inputs keep f64
// statistics, so their gradients are as accurate as f64 allows. An undefined weight or
// bias means "no affine transform" (weight 1, bias 0). rms_norm is layer_norm without centring, and
// the kernels share one implementation: mean is undefined for rms_norm.
#pragma once

#include "core/tensor.h"
#include "kernels/ops.h"

namespace brigade::cpu {

// y = (x - mean) * rstd * weight + bias, writing the per-row mean and rstd.
void layer_norm(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& weight,
                const Tensor& bias, double eps);
// y = x * rstd * weight, with rstd = 1 / sqrt(mean(x^2) + eps).
void rms_norm(const Tensor& y, const Tensor& rstd, const Tensor& x, const Tensor& weight, double eps);

// grad_x from grad_y. `mean` undefined selects the rms_norm formula.
void norm_backward_input(const Tensor& grad_x, const Tensor& grad_y, const Tensor& x, const Tensor& weight,
                         const Tensor& mean, const Tensor& rstd);
// grad_weight = sum over rows of grad_y * x_hat, grad_bias = sum over rows of grad_y (either may be
// undefined: not computed). `mean` undefined selects rms_norm's x_hat = x * rstd.
void norm_backward_params(const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& grad_y, const Tensor& x,
                          const Tensor& mean, const Tensor& rstd);

}  // namespace brigade::cpu
