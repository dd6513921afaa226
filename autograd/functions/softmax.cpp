// Differentiable softmax and log_softmax. Both backward kernels need only the output y (not x), so
// that is what the tape keeps.
#include "autograd/functions.h"
#include "autograd/tape.h"
#include "kernels/ops.h"

namespace brigade {

Tensor softmax(const Tensor& x, int64_t dim) {
  Tensor y = ops::softmax(x, dim);
  Tensor y_saved = y.detach();  // same bytes, without y's autograd identity
  record("softmax", {x}, {y}, [y_saved, dim](const std::vector<Tensor>& g, const std::vector<bool>&) {
    return std::vector<Tensor>{ops::softmax_backward(g[0], y_saved, dim)};
  });
  return y;
}

Tensor log_softmax(const Tensor& x, int64_t dim) {
  Tensor y = ops::log_softmax(x, dim);
  Tensor y_saved = y.detach();
  record("log_softmax", {x}, {y}, [y_saved, dim](const std::vector<Tensor>& g, const std::vector<bool>&) {
    return std::vector<Tensor>{ops::log_softmax_backward(g[0], y_saved, dim)};
  });
  return y;
}

}  // namespace brigade
