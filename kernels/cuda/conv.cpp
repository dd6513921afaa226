// cuda::conv2d and its backward kernels: which implementation runs (kernels/twins/conv.inc).
//
// On the GPU (the contract both backends share: kernels/twins/conv.inc):
// f32, f64, bf16 and f16 directly (16-bit values computed in f32); operands are contiguous NCHW, as
// for the CPU kernels. Each runs the backend ops::conv_backend() names: cuDNN (kernels/cuda/
// conv_cudnn.cpp) or the direct kernels (kernels/cuda/conv_direct.cu), which are also what runs in
// a build without cuDNN and for shapes with an empty dim.
#include "kernels/cuda/kernels.h"

#include <initializer_list>

#include "kernels/cuda/conv_direct.h"
#if BRIGADE_HAVE_CUDNN
#include "kernels/cuda/conv_cudnn.h"
#endif

namespace brigade::cuda {
namespace {

// cuDNN runs when the build has it, the backend choice allows it, and no operand is empty (cuDNN
// rejects zero-sized descriptors; the direct kernels just write zeros, or nothing).
[[maybe_unused]] bool use_cudnn(std::initializer_list<const Tensor*> operands) {
#if BRIGADE_HAVE_CUDNN
  if (ops::conv_backend() == ops::ConvBackend::direct) return false;
  for (const Tensor* t : operands)
    if (t->numel() == 0) return false;
  return true;
#else
  (void)operands;
  return false;
#endif
}

}  // namespace

void conv2d(const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor& bias, ops::Conv2dParams p) {
#if BRIGADE_HAVE_CUDNN
  if (use_cudnn({&y, &x, &weight})) return conv2d_cudnn(y, x, weight, bias, p);
#endif
  conv2d_direct(y, x, weight, bias, p);
}

void conv2d_backward_input(const Tensor& grad_x, const Tensor& grad_y, const Tensor& weight, ops::Conv2dParams p) {
#if BRIGADE_HAVE_CUDNN
  if (use_cudnn({&grad_x, &grad_y, &weight})) return conv2d_backward_input_cudnn(grad_x, grad_y, weight, p);
#endif
  conv2d_backward_input_direct(grad_x, grad_y, weight, p);
}

void conv2d_backward_weight(const Tensor& grad_weight, const Tensor& grad_y, const Tensor& x, ops::Conv2dParams p) {
#if BRIGADE_HAVE_CUDNN
  if (use_cudnn({&grad_weight, &grad_y, &x})) return conv2d_backward_weight_cudnn(grad_weight, grad_y, x, p);
#endif
  conv2d_backward_weight_direct(grad_weight, grad_y, x, p);
}

void conv2d_backward_bias(const Tensor& grad_bias, const Tensor& grad_y) { conv2d_bias_sum(grad_bias, grad_y); }

}  // namespace brigade::cuda
