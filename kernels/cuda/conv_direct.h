// The hand-written convolution kernels (kernels/cuda/conv_direct.cu): the reference GPU path, and
// the small helpers the cuDNN path shares. Same contract as kernels/cuda/conv.h.
#pragma once

#include "core/tensor.h"
#include "kernels/ops.h"

namespace brigade::cuda {

// Direct loops over the kernel taps, one thread per output element (one block per weight element
// for the weight gradient). The sums run in the CPU reference's order: forward and input gradient
// match it bit for bit; the weight gradient is a fixed-order block reduction.
void conv2d_direct(const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor& bias, ops::Conv2dParams p);
void conv2d_backward_input_direct(const Tensor& grad_x, const Tensor& grad_y, const Tensor& weight,
                                  ops::Conv2dParams p);
void conv2d_backward_weight_direct(const Tensor& grad_weight, const Tensor& grad_y, const Tensor& x,
                                   ops::Conv2dParams p);

// grad_bias [O] = grad_y [N, O, OH, OW] summed over N, OH and OW: one block per channel.
void conv2d_bias_sum(const Tensor& grad_bias, const Tensor& grad_y);
// y [N, O, OH, OW] = bias [O] broadcast; cuDNN then adds the convolution into it.
void fill_channel_bias(const Tensor& y, const Tensor& bias);

}  // namespace brigade::cuda
