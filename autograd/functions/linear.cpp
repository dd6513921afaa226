// linear(x, W, b) = x @ W^T + b, as ONE recorded op.
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

Tensor linear(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in) {
  const Tensor x = autocast(x_in), weight = autocast(weight_in), bias = autocast(bias_in);
  ops::check_defined("linear", x, "input");
  ops::check_defined("linear", weight, "weight");
  BRIGADE_CHECK(weight.dim() == 2, "linear: weight must be 2-D [out, in], got shape ", shape_str(weight.shape()));
  BRIGADE_CHECK(x.dim() >= 1 && x.size(-1) == weight.size(1), "linear: input shape ", shape_str(x.shape()),
                " does not end in weight's in_features (weight shape ", shape_str(weight.shape()), ")");
  if (bias.defined())
    BRIGADE_CHECK(bias.shape() == Shape{weight.size(0)}, "linear: bias shape ", shape_str(bias.shape()),
                  " should be [", weight.size(0), "] for weight shape ", shape_str(weight.shape()));
  const int64_t in = weight.size(1), out = weight.size(0);

  Tensor y;
  {
    NoGradGuard plumbing;  // the transposed view below is how the GEMM reads W, not a graph node
    y = ops::matmul(x, weight.transpose(0, 1));
    if (bias.defined()) y = ops::binary(ops::BinaryOp::add, y, bias);
  }
  record("linear", {x, weight, bias}, {y},
         [x, weight, bias, in, out](const std::vector<Tensor>& g, const std::vector<bool>& want) {
           std::vector<Tensor> grads(3);
           const Tensor gy_rows = g[0].reshape({-1, out});  // every leading dim is a row
           if (want[0]) grads[0] = ops::matmul(g[0], weight);                      // dy @ W
           if (want[1]) grads[1] = ops::matmul(gy_rows.transpose(0, 1), x.reshape({-1, in}));  // dy^T @ x
           if (want[2]) grads[2] = ops::sum(gy_rows, {0}, false);
           return grads;
         });
  return y;
}

}  // namespace brigade
