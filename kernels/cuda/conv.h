// CUDA kernels: conv — same signatures as kernels/cpu/conv (see kernels/cuda/kernels.h).
//
// f32, f64, bf16 and f16 directly (16-bit values computed in f32); operands are contiguous NCHW, as
// for the CPU kernels. Each runs the backend ops::conv_backend() names: cuDNN (kernels/cuda/
// conv_cudnn.cpp) or the direct kernels (kernels/cuda/conv_direct.cu), which are also what runs in
// a build without cuDNN and for shapes with an empty dim.
#pragma once

#include "core/tensor.h"
#include "kernels/ops.h"

namespace brigade::cuda {

void conv2d(const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor& bias, ops::Conv2dParams p);
void conv2d_backward_input(const Tensor& grad_x, const Tensor& grad_y, const Tensor& weight, ops::Conv2dParams p);
void conv2d_backward_weight(const Tensor& grad_weight, const Tensor& grad_y, const Tensor& x, ops::Conv2dParams p);
// Always the hand-written reduction (deterministic; cuDNN would add nothing here).
void conv2d_backward_bias(const Tensor& grad_bias, const Tensor& grad_y);

}  // namespace brigade::cuda
