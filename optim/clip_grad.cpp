#include "optim/clip_grad.h"

#include <cmath>

#include "kernels/ops.h"

namespace brigade::optim {

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  BRIGADE_CHECK(std::isfinite(max_norm) && max_norm > 0, "clip_grad_norm: max_norm must be a finite number > 0, got ",
                max_norm);
  std::vector<Tensor> grads;
  double sum_of_squares = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    BRIGADE_CHECK(params[i].defined(), "clip_grad_norm: parameter ", i, " is an undefined tensor");
    Tensor g = params[i].grad();
    if (!g.defined()) continue;
    // Squares summed in f64 on the gradient's own device: one scalar per tensor comes back.
    Tensor g64 = ops::to_dtype(g, DType::f64);
    sum_of_squares += ops::sum(ops::binary(ops::BinaryOp::mul, g64, g64), {}, false).item();
    grads.push_back(g);
  }
  const double norm = std::sqrt(sum_of_squares);
  if (!std::isfinite(norm)) return norm;
  // The 1e-6 keeps the clipped norm just under max_norm and avoids dividing by zero.
  const double scale = max_norm / (norm + 1e-6);
  if (scale < 1)
    for (const Tensor& g : grads) ops::scale_(g, scale);
  return norm;
}

}  // namespace brigade::optim
