// ops: layer_norm and rms_norm over the last dim, and their backward kernels.
//
// The kernels see contiguous [rows, D] data in f32 or f64: this layer makes inputs contiguous,
// widens bf16/f16 to f32 (and narrows results back), and always keeps the saved statistics in f32
// (what a GPU kernel would save, whatever the activation dtype).
#include "kernels/cpu/kernels.h"
#include "kernels/ops.h"

namespace brigade::ops {
namespace {

Tensor contiguous_as(const Tensor& t, DType dtype) { return t.defined() ? contiguous(to_dtype(t, dtype)) : t; }
Tensor narrow_to(const Tensor& t, DType dtype) { return t.defined() ? to_dtype(t, dtype) : t; }

// The dtype the CPU kernels compute in for inputs of dtype t.
DType compute_dtype(DType t) { return t == DType::f64 ? DType::f64 : DType::f32; }

int64_t rows_of(const Tensor& x) { return x.size(-1) == 0 ? 0 : x.numel() / x.size(-1); }

void check_param(const char* op, const Tensor& x, const Tensor& p, const char* name) {
  if (!p.defined()) return;
  check_same_device(op, x, p);
  check_same_dtype(op, x, p);
  BRIGADE_CHECK(p.shape() == Shape{x.size(-1)}, op, ": ", name, " has shape ", shape_str(p.shape()), " but input ",
                shape_str(x.shape()), " needs [", x.size(-1), "]");
}

void check_input(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_defined(op, x, "input");
  check_floating(op, x);
  BRIGADE_CHECK(x.dim() >= 1, op, ": input must have at least one dim, got a scalar");
  check_param(op, x, weight, "weight");
  check_param(op, x, bias, "bias");
  check_cpu_backend(op, x);
}

void check_backward(const char* op, const Tensor& grad_y, const Tensor& x, const NormOutput& saved, bool centred) {
  check_defined(op, grad_y, "grad_y");
  check_same_device(op, grad_y, x);
  BRIGADE_CHECK(grad_y.shape() == x.shape(), op, ": grad shape ", shape_str(grad_y.shape()), " differs from input shape ",
                shape_str(x.shape()));
  const Shape stats{rows_of(x)};
  BRIGADE_CHECK(saved.rstd.defined() && saved.rstd.shape() == stats && saved.rstd.dtype() == DType::f32 &&
                    (!centred || (saved.mean.defined() && saved.mean.shape() == stats && saved.mean.dtype() == DType::f32)),
                op, ": saved statistics do not match input shape ", shape_str(x.shape()),
                " (expected f32 mean/rstd of shape ", shape_str(stats), ")");
}

}  // namespace

NormOutput layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  check_input("layer_norm", x, weight, bias);
  const DType t = compute_dtype(x.dtype());
  const Tensor xc = contiguous_as(x, t);
  NormOutput out;
  out.y = empty(x.shape(), t, x.device());
  out.mean = empty({rows_of(x)}, DType::f32, x.device());
  out.rstd = empty({rows_of(x)}, DType::f32, x.device());
  cpu::layer_norm(out.y, out.mean, out.rstd, xc, contiguous_as(weight, t), contiguous_as(bias, t), eps);
  out.y = narrow_to(out.y, x.dtype());
  return out;
}

Tensor layer_norm_backward_input(const Tensor& grad_y, const Tensor& x, const Tensor& weight, const NormOutput& saved) {
  check_input("layer_norm_backward_input", x, weight, Tensor());
  check_backward("layer_norm_backward_input", grad_y, x, saved, true);
  const DType t = compute_dtype(x.dtype());
  Tensor grad_x = empty(x.shape(), t, x.device());
  cpu::norm_backward_input(grad_x, contiguous_as(grad_y, t), contiguous_as(x, t), contiguous_as(weight, t), saved.mean,
                           saved.rstd);
  return narrow_to(grad_x, x.dtype());
}

std::pair<Tensor, Tensor> layer_norm_backward_params(const Tensor& grad_y, const Tensor& x, const Tensor& weight,
                                                     const Tensor& bias, const NormOutput& saved) {
  check_input("layer_norm_backward_params", x, weight, bias);
  check_backward("layer_norm_backward_params", grad_y, x, saved, true);
  if (!weight.defined() && !bias.defined()) return {};
  const DType t = compute_dtype(x.dtype());
  const Shape param_shape{x.size(-1)};
  Tensor grad_weight = weight.defined() ? empty(param_shape, t, x.device()) : Tensor();
  Tensor grad_bias = bias.defined() ? empty(param_shape, t, x.device()) : Tensor();
  cpu::norm_backward_params(grad_weight, grad_bias, contiguous_as(grad_y, t), contiguous_as(x, t), saved.mean,
                            saved.rstd);
  return {narrow_to(grad_weight, x.dtype()), narrow_to(grad_bias, x.dtype())};
}

NormOutput rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  check_input("rms_norm", x, weight, Tensor());
  const DType t = compute_dtype(x.dtype());
  NormOutput out;
  out.y = empty(x.shape(), t, x.device());
  out.rstd = empty({rows_of(x)}, DType::f32, x.device());
  cpu::rms_norm(out.y, out.rstd, contiguous_as(x, t), contiguous_as(weight, t), eps);
  out.y = narrow_to(out.y, x.dtype());
  return out;
}

Tensor rms_norm_backward_input(const Tensor& grad_y, const Tensor& x, const Tensor& weight, const NormOutput& saved) {
  check_input("rms_norm_backward_input", x, weight, Tensor());
  check_backward("rms_norm_backward_input", grad_y, x, saved, false);
  const DType t = compute_dtype(x.dtype());
  Tensor grad_x = empty(x.shape(), t, x.device());
  cpu::norm_backward_input(grad_x, contiguous_as(grad_y, t), contiguous_as(x, t), contiguous_as(weight, t), Tensor(),
                           saved.rstd);
  return narrow_to(grad_x, x.dtype());
}

Tensor rms_norm_backward_weight(const Tensor& grad_y, const Tensor& x, const NormOutput& saved) {
  check_input("rms_norm_backward_weight", x, Tensor(), Tensor());
  check_backward("rms_norm_backward_weight", grad_y, x, saved, false);
  const DType t = compute_dtype(x.dtype());
  Tensor grad_weight = empty({x.size(-1)}, t, x.device());
  cpu::norm_backward_params(grad_weight, Tensor(), contiguous_as(grad_y, t), contiguous_as(x, t), Tensor(), saved.rstd);
  return narrow_to(grad_weight, x.dtype());
}

}  // namespace brigade::ops
