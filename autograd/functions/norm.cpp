// Differentiable layer_norm and rms_norm. The backward is two independent kernels — one for the
// input gradient, one for the parameter gradients — so a zero-bubble schedule can ask for them at
// different times (the tape's `want` mask) and each is computed only when asked for.
#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "autograd/tape.h"
#include "kernels/ops.h"

namespace brigade {
namespace {

// What the backward keeps: the statistics, not the output (which may be large and isn't needed).
ops::NormOutput statistics_of(const ops::NormOutput& out) { return {Tensor(), out.mean, out.rstd}; }

}  // namespace

Tensor layer_norm(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in, double eps) {
  const Tensor x = autocast(x_in), weight = autocast(weight_in), bias = autocast(bias_in);
  ops::NormOutput out = ops::layer_norm(x, weight, bias, eps);
  if (!should_record({x, weight, bias})) return out.y;
  record("layer_norm", {x, weight, bias}, {out.y},
         [x, weight, bias, saved = statistics_of(out)](const std::vector<Tensor>& g, const std::vector<bool>& want) {
           std::vector<Tensor> grads(3);
           if (want[0]) grads[0] = ops::layer_norm_backward_input(g[0], x, weight, saved);
           if (want[1] || want[2]) {
             // Passing a parameter as undefined skips its gradient.
             auto [gw, gb] = ops::layer_norm_backward_params(g[0], x, want[1] ? weight : Tensor(),
                                                             want[2] ? bias : Tensor(), saved);
             grads[1] = gw;
             grads[2] = gb;
           }
           return grads;
         });
  return out.y;
}

Tensor rms_norm(const Tensor& x_in, const Tensor& weight_in, double eps) {
  const Tensor x = autocast(x_in), weight = autocast(weight_in);
  ops::NormOutput out = ops::rms_norm(x, weight, eps);
  if (!should_record({x, weight})) return out.y;
  record("rms_norm", {x, weight}, {out.y},
         [x, weight, saved = statistics_of(out)](const std::vector<Tensor>& g, const std::vector<bool>& want) {
           std::vector<Tensor> grads(2);
           if (want[0]) grads[0] = ops::rms_norm_backward_input(g[0], x, weight, saved);
           if (want[1]) grads[1] = ops::rms_norm_backward_weight(g[0], x, saved);
           return grads;
         });
  return out.y;
}

}  // namespace brigade
