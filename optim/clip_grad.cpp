#include "optim/clip_grad.h"

#include <cmath>

#include "kernels/ops.h"
#include "kernels/optimizer_ops.h"

namespace brigade::optim {

namespace {

std::vector<Tensor> gradients(const std::vector<Tensor>& params) {
  std::vector<Tensor> grads;
  for (size_t i = 0; i < params.size(); ++i) {
    BRIGADE_CHECK(params[i].defined(), "clip_grad_norm: parameter ", i, " is an undefined tensor");
    if (params[i].grad().defined()) grads.push_back(params[i].grad());
  }
  return grads;
}

void check_max_norm(double max_norm) {
  BRIGADE_CHECK(std::isfinite(max_norm) && max_norm > 0, "clip_grad_norm: max_norm must be a finite number > 0, got ",
                max_norm);
}

}  // namespace

Tensor clip_grad_norm_on_device(const std::vector<Tensor>& params, double max_norm) {
  check_max_norm(max_norm);
  const std::vector<Tensor> grads = gradients(params);
  BRIGADE_CHECK(!grads.empty(), "clip_grad_norm_on_device: none of the ", params.size(),
                " parameters has a gradient (the norm's device is theirs)");
  // Squares summed in f64 on the gradients' device, the clipping decided there too: a few launches
  // for the whole model (ops::sum_of_squares), no wait.
  const Tensor sum_of_squares = ops::sum_of_squares(grads);
  ops::clip_by_norm_(grads, sum_of_squares, max_norm);
  return ops::unary(ops::UnaryOp::sqrt, sum_of_squares);
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  check_max_norm(max_norm);
  const std::vector<Tensor> grads = gradients(params);
  if (grads.empty()) return 0;
  const Tensor sum_of_squares = ops::sum_of_squares(grads);
  ops::clip_by_norm_(grads, sum_of_squares, max_norm);
  // The one wait: the norm itself, read after the clipping is queued.
  return std::sqrt(sum_of_squares.item());
}

}  // namespace brigade::optim
