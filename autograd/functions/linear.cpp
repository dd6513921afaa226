// linear(x, W, b) = x @ W^T + b as ONE recorded op; with an activation, act(x @ W^T + b) computed by one
// GEMM with the bias and activation in its epilogue (ops::linear), recorded as the linear node and
// the activation's node.
//
// Writing it as matmul(x, W.transpose(0, 1)) would give the same numbers, but the tape would then see
// the transposed view (not W) as the matmul's input, and the expensive weight gradient x^T·dy would
// be computed while propagating input gradients. As one node with inputs {x, W, b}, the zero-bubble
// split works as intended: backward_input computes dy·W now, backward_weight computes dy^T·x and the
// bias sum later.
#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "autograd/tape.h"
#include "kernels/ops.h"

namespace brigade {

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  return linear(x, weight, bias, Activation::none);
}

Tensor linear(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in, Activation act) {
  const Tensor x = autocast(x_in), weight = autocast(weight_in), bias = autocast(bias_in);
  const bool recording = should_record({x, weight, bias});
  // The activation's backward needs its input; without a tape it is not kept at all.
  const ops::LinearOutput out = ops::linear(x, weight, bias, act, recording && act != Activation::none);
  if (!recording) return out.y;
  const int64_t in = weight.size(1), out_features = weight.size(0);
  // The linear layer's node: inputs {x, W, b}, output the activation's input (y itself without one).
  const Tensor& pre = act == Activation::none ? out.y : out.pre;
  record("linear", {x, weight, bias}, {pre},
         [x, weight, bias, in, out_features](const std::vector<Tensor>& g, const std::vector<bool>& want) {
           std::vector<Tensor> grads(3);
           // Every leading dim is a row (counted, not inferred: with in = 0, x has no elements).
           const int64_t row_count = shape_numel(Shape(x.shape().begin(), x.shape().end() - 1));
           const Tensor rows = g[0].reshape({row_count, out_features});
           if (want[0]) grads[0] = ops::matmul(g[0], weight);                                  // dy @ W
           if (want[1]) grads[1] = ops::matmul(rows.transpose(0, 1), x.reshape({row_count, in}));  // dy^T @ x
           if (want[2]) grads[2] = ops::sum(rows, {0}, false);
           return grads;
         });
  if (act == Activation::none) return out.y;
  // The activation's own node, as gelu() records it: computed in the GEMM's epilogue, but on the tape
  // exactly the two nodes of linear() followed by gelu(). So the gradients are the same, and a
  // zero-bubble schedule frees this node's saved `pre` (the block's widest activation) after the
  // input-gradient phase instead of keeping it for the weight phase.
  record("gelu", {pre}, {out.y},
         [pre = pre.detach(), y = out.y.detach()](const std::vector<Tensor>& g, const std::vector<bool>&) {
           return std::vector<Tensor>{ops::unary_backward(ops::UnaryOp::gelu, g[0], pre, y)};
         });
  return out.y;
}

}  // namespace brigade
