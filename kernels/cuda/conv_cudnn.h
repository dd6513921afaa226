// Convolutions through cuDNN's convolution API (kernels/cuda/conv_cudnn.cpp; builds with cuDNN
// only). Same contract as kernels/cuda/conv.h; every dim must be non-empty.
#pragma once

#include "core/tensor.h"
#include "kernels/ops.h"

namespace brigade::cuda {

void conv2d_cudnn(const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor& bias, ops::Conv2dParams p);
void conv2d_backward_input_cudnn(const Tensor& grad_x, const Tensor& grad_y, const Tensor& weight,
                                 ops::Conv2dParams p);
void conv2d_backward_weight_cudnn(const Tensor& grad_weight, const Tensor& grad_y, const Tensor& x,
                                  ops::Conv2dParams p);

// How many calls above found no acceptable cuDNN algorithm and ran the direct kernel instead (since
// the process started). The benchmark checks it, so a "cuDNN" row never times the direct kernel.
int64_t cudnn_conv_fallbacks();

}  // namespace brigade::cuda
