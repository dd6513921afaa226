// ops: layer_norm and rms_norm over the last dim, and their backward kernels; add_layer_norm, a
// residual add fused with the layer_norm after it.
//
// The kernels see contiguous [rows, D] data: this layer makes inputs contiguous and, for the CPU
// reference, widens bf16/f16 to f32 (narrowing results back); CUDA kernels read 16-bit data directly
// and compute in f32. The saved statistics (mean, rstd) have the compute dtype — f64 for f64 inputs,
// f32 otherwise — so an f64 backward is as accurate as f64 allows.
#include "kernels/dispatch.h"
#include "kernels/ops.h"

namespace brigade::ops {
namespace {

Tensor contiguous_as(const Tensor& t, DType dtype) { return t.defined() ? contiguous(to_dtype(t, dtype)) : t; }
Tensor narrow_to(const Tensor& t, DType dtype) { return t.defined() ? to_dtype(t, dtype) : t; }

// The dtype statistics are computed and saved in, for inputs of dtype t.
DType stats_dtype(DType t) { return t == DType::f64 ? DType::f64 : DType::f32; }
// The dtype the kernels take x's data in: the CPU widens bf16/f16 to f32, CUDA takes them as they are.
DType kernel_dtype(const Tensor& x) { return x.device().is_cpu() ? stats_dtype(x.dtype()) : x.dtype(); }

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
}

void check_backward(const char* op, const Tensor& grad_y, const Tensor& x, const NormOutput& saved, bool centred) {
  check_defined(op, grad_y, "grad_y");
  check_same_device(op, grad_y, x);
  BRIGADE_CHECK(grad_y.shape() == x.shape(), op, ": grad shape ", shape_str(grad_y.shape()), " differs from input shape ",
                shape_str(x.shape()));
  const Shape stats{rows_of(x)};
  const DType t = stats_dtype(x.dtype());
  const auto fits = [&](const Tensor& s) {
    return s.defined() && s.shape() == stats && s.dtype() == t && s.device() == x.device();
  };
  BRIGADE_CHECK(fits(saved.rstd) && (!centred || fits(saved.mean)), op, ": saved statistics do not match input shape ",
                shape_str(x.shape()), " (expected ", dtype_name(t), " ", centred ? "mean/rstd" : "rstd", " of shape ",
                shape_str(stats), " on ", x.device().str(), ")");
}

// layer_norm's and rms_norm's input gradient: one kernel, which centres only when given the saved
// mean (`centred`, layer_norm).
Tensor backward_input(const char* op, const Tensor& grad_y, const Tensor& x, const Tensor& weight,
                      const NormOutput& saved, bool centred) {
  check_input(op, x, weight, Tensor());
  check_backward(op, grad_y, x, saved, centred);
  const DType t = kernel_dtype(x);
  const Tensor g = contiguous_as(grad_y, t), xc = contiguous_as(x, t), w = contiguous_as(weight, t);
  const Tensor mean = centred ? contiguous(saved.mean) : Tensor(), rstd = contiguous(saved.rstd);
  Tensor grad_x = empty(x.shape(), t, x.device());
  BRIGADE_DISPATCH(op, x, norm_backward_input(grad_x, g, xc, w, mean, rstd));
  return narrow_to(grad_x, x.dtype());
}

}  // namespace

NormOutput layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  check_input("layer_norm", x, weight, bias);
  const DType t = kernel_dtype(x);
  const Tensor xc = contiguous_as(x, t), w = contiguous_as(weight, t), b = contiguous_as(bias, t);
  NormOutput out;
  out.y = empty(x.shape(), t, x.device());
  out.mean = empty({rows_of(x)}, stats_dtype(x.dtype()), x.device());
  out.rstd = empty({rows_of(x)}, stats_dtype(x.dtype()), x.device());
  BRIGADE_DISPATCH("layer_norm", x, layer_norm(out.y, out.mean, out.rstd, xc, w, b, eps));
  out.y = narrow_to(out.y, x.dtype());
  return out;
}

Tensor layer_norm_backward_input(const Tensor& grad_y, const Tensor& x, const Tensor& weight, const NormOutput& saved) {
  return backward_input("layer_norm_backward_input", grad_y, x, weight, saved, true);
}

std::pair<Tensor, Tensor> layer_norm_backward_params(const Tensor& grad_y, const Tensor& x, const Tensor& weight,
                                                     const Tensor& bias, const NormOutput& saved) {
  check_input("layer_norm_backward_params", x, weight, bias);
  check_backward("layer_norm_backward_params", grad_y, x, saved, true);
  if (!weight.defined() && !bias.defined()) return {};
  const DType t = kernel_dtype(x);
  const Shape param_shape{x.size(-1)};
  Tensor grad_weight = weight.defined() ? empty(param_shape, t, x.device()) : Tensor();
  Tensor grad_bias = bias.defined() ? empty(param_shape, t, x.device()) : Tensor();
  const Tensor g = contiguous_as(grad_y, t), xc = contiguous_as(x, t);
  const Tensor mean = contiguous(saved.mean), rstd = contiguous(saved.rstd);
  BRIGADE_DISPATCH("layer_norm_backward_params", x, norm_backward_params(grad_weight, grad_bias, g, xc, mean, rstd));
  return {narrow_to(grad_weight, x.dtype()), narrow_to(grad_bias, x.dtype())};
}

AddNormOutput add_layer_norm(const Tensor& x, const Tensor& residual, const Tensor& weight, const Tensor& bias,
                             double eps) {
  check_input("add_layer_norm", x, weight, bias);
  check_defined("add_layer_norm", residual, "residual");
  check_same_device("add_layer_norm", x, residual);
  check_same_dtype("add_layer_norm", x, residual);
  BRIGADE_CHECK(residual.shape() == x.shape(), "add_layer_norm: residual shape ", shape_str(residual.shape()),
                " differs from input shape ", shape_str(x.shape()));
  // The CPU kernels compute 16-bit data in f32: the separate ops round the sum where the fused
  // kernel would (to x's dtype) only when run apart.
  if (x.device().is_cpu() && is_half(x.dtype())) {
    AddNormOutput out;
    out.sum = binary(BinaryOp::add, x, residual);
    out.norm = layer_norm(out.sum, weight, bias, eps);
    return out;
  }
  const DType t = x.dtype();
  const Tensor xc = contiguous(x), rc = contiguous(residual), w = contiguous_as(weight, t), b = contiguous_as(bias, t);
  AddNormOutput out;
  out.sum = empty(x.shape(), t, x.device());
  out.norm.y = empty(x.shape(), t, x.device());
  out.norm.mean = empty({rows_of(x)}, stats_dtype(t), x.device());
  out.norm.rstd = empty({rows_of(x)}, stats_dtype(t), x.device());
  BRIGADE_DISPATCH("add_layer_norm", x,
                   layer_norm(out.norm.y, out.norm.mean, out.norm.rstd, xc, w, b, eps, rc, out.sum));
  return out;
}

Tensor add_layer_norm_backward_input(const Tensor& grad_y, const Tensor& grad_sum, const Tensor& sum,
                                     const Tensor& weight, const NormOutput& saved) {
  check_defined("add_layer_norm_backward_input", grad_sum, "grad_sum");
  check_same_device("add_layer_norm_backward_input", grad_sum, sum);
  check_same_dtype("add_layer_norm_backward_input", grad_sum, sum);
  BRIGADE_CHECK(grad_sum.shape() == sum.shape(), "add_layer_norm_backward_input: grad_sum shape ",
                shape_str(grad_sum.shape()), " differs from sum shape ", shape_str(sum.shape()));
  if (sum.device().is_cpu() && is_half(sum.dtype()))  // as in the forward: the separate ops
    return binary(BinaryOp::add, grad_sum, layer_norm_backward_input(grad_y, sum, weight, saved));
  check_input("add_layer_norm_backward_input", sum, weight, Tensor());
  check_backward("add_layer_norm_backward_input", grad_y, sum, saved, true);
  const DType t = sum.dtype();
  const Tensor g = contiguous_as(grad_y, t), s = contiguous(sum), w = contiguous_as(weight, t);
  const Tensor gs = contiguous_as(grad_sum, t);
  const Tensor mean = contiguous(saved.mean), rstd = contiguous(saved.rstd);
  Tensor grad_x = empty(sum.shape(), t, sum.device());
  BRIGADE_DISPATCH("add_layer_norm_backward_input", sum, norm_backward_input(grad_x, g, s, w, mean, rstd, gs));
  return grad_x;
}

NormOutput rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  check_input("rms_norm", x, weight, Tensor());
  const DType t = kernel_dtype(x);
  const Tensor xc = contiguous_as(x, t), w = contiguous_as(weight, t);
  NormOutput out;
  out.y = empty(x.shape(), t, x.device());
  out.rstd = empty({rows_of(x)}, stats_dtype(x.dtype()), x.device());
  BRIGADE_DISPATCH("rms_norm", x, rms_norm(out.y, out.rstd, xc, w, eps));
  out.y = narrow_to(out.y, x.dtype());
  return out;
}

Tensor rms_norm_backward_input(const Tensor& grad_y, const Tensor& x, const Tensor& weight, const NormOutput& saved) {
  return backward_input("rms_norm_backward_input", grad_y, x, weight, saved, false);
}

Tensor rms_norm_backward_weight(const Tensor& grad_y, const Tensor& x, const NormOutput& saved) {
  check_input("rms_norm_backward_weight", x, Tensor(), Tensor());
  check_backward("rms_norm_backward_weight", grad_y, x, saved, false);
  const DType t = kernel_dtype(x);
  const Tensor g = contiguous_as(grad_y, t), xc = contiguous_as(x, t), rstd = contiguous(saved.rstd);
  Tensor grad_weight = empty({x.size(-1)}, t, x.device());
  BRIGADE_DISPATCH("rms_norm_backward_weight", x, norm_backward_params(grad_weight, Tensor(), g, xc, Tensor(), rstd));
  return narrow_to(grad_weight, x.dtype());
}

}  // namespace brigade::ops
