// CPU reference kernels: 2-D convolution, NCHW (see kernels/cpu/kernels.h for the contract).
//
// Unlike most reference kernels these take CONTIGUOUS operands (the op layer makes them so): a
// convolution reads every input element KH * KW times, so one up-front copy of a strided view costs
// little and lets every inner loop walk memory with unit steps.
#pragma once

#include "core/tensor.h"
#include "kernels/ops.h"

namespace brigade::cpu {

// y [N, O, OH, OW] = conv(x [N, C, H, W], weight [O, C, KH, KW]) + bias [O] (bias may be undefined).
void conv2d(const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor& bias, ops::Conv2dParams p);
// grad_x [N, C, H, W] from grad_y [N, O, OH, OW] and weight (grad_x's shape gives H and W).
void conv2d_backward_input(const Tensor& grad_x, const Tensor& grad_y, const Tensor& weight, ops::Conv2dParams p);
// grad_weight [O, C, KH, KW] from grad_y and x (grad_weight's shape gives KH and KW).
void conv2d_backward_weight(const Tensor& grad_weight, const Tensor& grad_y, const Tensor& x, ops::Conv2dParams p);
// grad_bias [O] = grad_y summed over N, OH and OW.
void conv2d_backward_bias(const Tensor& grad_bias, const Tensor& grad_y);

}  // namespace brigade::cpu
