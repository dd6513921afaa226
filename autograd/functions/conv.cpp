// Differentiable conv2d, max_pool2d and avg_pool2d (NCHW).
//
// conv2d's backward has three independent parts — the input gradient (which flows on to earlier
// layers) and the weight and bias gradients (which only feed the optimizer). Each is computed only
// when asked for, so a zero-bubble pipeline can run the input part now and the weight part later.
#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "autograd/tape.h"
#include "kernels/ops.h"

namespace brigade {

Tensor conv2d(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in, int64_t stride, int64_t padding) {
  const Tensor x = autocast(x_in), weight = autocast(weight_in), bias = autocast(bias_in);
  ops::Conv2dParams p{stride, padding};
  Tensor y = ops::conv2d(x, weight, bias, p);
  record("conv2d", {x, weight, bias}, {y}, [x, weight, p](const std::vector<Tensor>& g, const std::vector<bool>& want) {
    Tensor grad_x, grad_weight, grad_bias;
    if (want[0]) grad_x = ops::conv2d_backward_input(g[0], weight, x.shape(), p);
    if (want[1]) grad_weight = ops::conv2d_backward_weight(g[0], x, weight.shape(), p);
    if (want[2]) grad_bias = ops::conv2d_backward_bias(g[0]);  // want[2] is false when there is no bias
    return std::vector<Tensor>{grad_x, grad_weight, grad_bias};
  });
  return y;
}

namespace {

ops::Pool2dParams pool_params(int64_t kernel, int64_t stride, int64_t padding) {
  return {kernel, stride == -1 ? kernel : stride, padding};  // stride -1: windows side by side
}

}  // namespace

Tensor max_pool2d(const Tensor& x, int64_t kernel, int64_t stride, int64_t padding) {
  ops::Pool2dParams p = pool_params(kernel, stride, padding);
  std::pair<Tensor, Tensor> out = ops::max_pool2d(x, p);
  // Backward needs only where each maximum came from, not x itself.
  record("max_pool2d", {x}, {out.first},
         [indices = out.second, x_shape = x.shape(), p](const std::vector<Tensor>& g, const std::vector<bool>&) {
           return std::vector<Tensor>{ops::max_pool2d_backward(g[0], indices, x_shape, p)};
         });
  return out.first;
}

Tensor avg_pool2d(const Tensor& x, int64_t kernel, int64_t stride, int64_t padding) {
  ops::Pool2dParams p = pool_params(kernel, stride, padding);
  Tensor y = ops::avg_pool2d(x, p);
  record("avg_pool2d", {x}, {y}, [x_shape = x.shape(), p](const std::vector<Tensor>& g, const std::vector<bool>&) {
    return std::vector<Tensor>{ops::avg_pool2d_backward(g[0], x_shape, p)};
  });
  return y;
}

}  // namespace brigade
