// Differentiable layer_norm, rms_norm and add_layer_norm (a residual add fused with the norm after
// it). The backward is two independent kernels — one for the input gradient, one for the parameter
// gradients — so a zero-bubble schedule can ask for them at different times (the tape's `want` mask)
// and each is computed only when asked for.
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

std::pair<Tensor, Tensor> add_layer_norm(const Tensor& x_in, const Tensor& residual_in, const Tensor& weight_in,
                                         const Tensor& bias_in, double eps) {
  // The add's dtype rule (an f32 operand is converted only to match a 16-bit one), then the norm's
  // (its input converted whenever a scope is active). Where the two disagree — both operands f32
  // under autocast: an f32 sum, normalised in the autocast dtype — the separate ops give the
  // defined result, and they run.
  const Tensor x = autocast_to_match(x_in, residual_in), residual = autocast_to_match(residual_in, x_in);
  if (autocast_dtype() && x.dtype() == DType::f32 && residual.dtype() == DType::f32) {
    const Tensor h = add(x, residual);
    return {h, layer_norm(h, weight_in, bias_in, eps)};
  }
  const Tensor weight = autocast(weight_in), bias = autocast(bias_in);
  ops::AddNormOutput out = ops::add_layer_norm(x, residual, weight, bias, eps);
  if (!should_record({x, residual, weight, bias})) return {out.sum, out.norm.y};
  // Outputs {sum, y}. The gradient of the sum and of both inputs is one tensor: the norm's input
  // gradient plus what reaches the sum from its other uses, added in the same kernel.
  record("add_layer_norm", {x, residual, weight, bias}, {out.sum, out.norm.y},
         [sum = out.sum, weight, bias, saved = statistics_of(out.norm)](const std::vector<Tensor>& g,
                                                                        const std::vector<bool>& want) {
           std::vector<Tensor> grads(4);
           if (want[0] || want[1]) {
             const Tensor grad_sum = ops::add_layer_norm_backward_input(g[1], g[0], sum, weight, saved);
             grads[0] = want[0] ? grad_sum : Tensor();
             grads[1] = want[1] ? grad_sum : Tensor();
           }
           if (want[2] || want[3]) {
             auto [gw, gb] = ops::layer_norm_backward_params(g[1], sum, want[2] ? weight : Tensor(),
                                                             want[3] ? bias : Tensor(), saved);
             grads[2] = gw;
             grads[3] = gb;
           }
           return grads;
         });
  return {out.sum, out.norm.y};
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
