// ops: elementwise. This file is the model for every op in kernels/: check once, widen half types,
// allocate the output, dispatch on device.
#include "core/factory.h"
#include "kernels/cpu/kernels.h"
#include "kernels/ops.h"

namespace brigade::ops {

const char* binary_op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::add: return "add";
    case BinaryOp::sub: return "sub";
    case BinaryOp::mul: return "mul";
    case BinaryOp::div: return "div";
  }
  return "?";
}

const char* unary_op_name(UnaryOp op) {
  switch (op) {
    case UnaryOp::neg: return "neg";
    case UnaryOp::exp: return "exp";
    case UnaryOp::log: return "log";
    case UnaryOp::sqrt: return "sqrt";
    case UnaryOp::rsqrt: return "rsqrt";
    case UnaryOp::tanh: return "tanh";
    case UnaryOp::relu: return "relu";
    case UnaryOp::gelu: return "gelu";
    case UnaryOp::silu: return "silu";
    case UnaryOp::sigmoid: return "sigmoid";
  }
  return "?";
}

namespace {

// bf16/f16 compute in f32 on the CPU: run `f` on widened copies and narrow the result.
template <class F>
Tensor widened(DType dtype, F&& f) {
  return to_dtype(f(DType::f32), dtype);
}

Tensor as(const Tensor& x, DType t) { return to_dtype(x, t); }

// The dtype the CPU computes a result of dtype `t` in.
DType compute_dtype(DType t) { return is_half(t) ? DType::f32 : t; }

}  // namespace

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  const char* name = binary_op_name(op);
  check_defined(name, a, "a");
  check_defined(name, b, "b");
  check_same_device(name, a, b);
  check_same_dtype(name, a, b);
  check_floating(name, a);
  Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  if (is_half(a.dtype()))
    return widened(a.dtype(), [&](DType t) { return binary(op, as(a, t), as(b, t)); });
  check_cpu_backend(name, a);
  Tensor out = empty(shape, a.dtype(), a.device());
  cpu::binary(op, out, a, b);
  return out;
}

Tensor unary(UnaryOp op, const Tensor& x) {
  const char* name = unary_op_name(op);
  check_defined(name, x, "input");
  check_floating(name, x);
  if (is_half(x.dtype())) return widened(x.dtype(), [&](DType t) { return unary(op, as(x, t)); });
  check_cpu_backend(name, x);
  Tensor out = empty(x.shape(), x.dtype(), x.device());
  cpu::unary(op, out, x);
  return out;
}

Tensor unary_backward(UnaryOp op, const Tensor& grad_y, const Tensor& x, const Tensor& y) {
  const char* name = unary_op_name(op);
  check_defined(name, grad_y, "grad_y");
  check_defined(name, x, "input");
  check_defined(name, y, "output");
  check_same_device(name, grad_y, x);
  check_same_device(name, y, x);
  check_floating(name, x);
  check_floating(name, grad_y);
  BRIGADE_CHECK(grad_y.shape() == x.shape() && y.shape() == x.shape(), name, "_backward: grad shape ",
                shape_str(grad_y.shape()), ", input shape ", shape_str(x.shape()), " and output shape ",
                shape_str(y.shape()), " must match");
  // The gradient takes x's dtype; mixed or half inputs are first brought to the compute dtype.
  const DType t = compute_dtype(x.dtype());
  if (x.dtype() != t || grad_y.dtype() != t || y.dtype() != t)
    return to_dtype(unary_backward(op, as(grad_y, t), as(x, t), as(y, t)), x.dtype());
  check_cpu_backend(name, x);
  Tensor grad_x = empty(x.shape(), x.dtype(), x.device());
  cpu::unary_backward(op, grad_x, grad_y, x, y);
  return grad_x;
}

Tensor scale_shift(const Tensor& x, double scale, double shift) {
  check_defined("scale_shift", x, "input");
  check_floating("scale_shift", x);
  if (is_half(x.dtype())) return widened(x.dtype(), [&](DType t) { return scale_shift(as(x, t), scale, shift); });
  check_cpu_backend("scale_shift", x);
  Tensor out = empty(x.shape(), x.dtype(), x.device());
  cpu::scale_shift(out, x, scale, shift);
  return out;
}

Tensor pow_scalar(const Tensor& x, double exponent) {
  check_defined("pow", x, "input");
  check_floating("pow", x);
  if (is_half(x.dtype())) return widened(x.dtype(), [&](DType t) { return pow_scalar(as(x, t), exponent); });
  check_cpu_backend("pow", x);
  Tensor out = empty(x.shape(), x.dtype(), x.device());
  cpu::pow_scalar(out, x, exponent);
  return out;
}

Tensor pow_scalar_backward(const Tensor& grad_y, const Tensor& x, double exponent) {
  check_defined("pow_backward", grad_y, "grad_y");
  check_defined("pow_backward", x, "input");
  check_same_device("pow_backward", grad_y, x);
  check_floating("pow_backward", x);
  check_floating("pow_backward", grad_y);
  BRIGADE_CHECK(grad_y.shape() == x.shape(), "pow_backward: grad shape ", shape_str(grad_y.shape()),
                " differs from input shape ", shape_str(x.shape()));
  const DType t = compute_dtype(x.dtype());
  if (x.dtype() != t || grad_y.dtype() != t)
    return to_dtype(pow_scalar_backward(as(grad_y, t), as(x, t), exponent), x.dtype());
  check_cpu_backend("pow_backward", x);
  Tensor grad_x = empty(x.shape(), x.dtype(), x.device());
  cpu::pow_scalar_backward(grad_x, grad_y, x, exponent);
  return grad_x;
}

void add_(const Tensor& dst, const Tensor& src, double alpha) {
  check_defined("add_", dst, "destination");
  check_defined("add_", src, "source");
  check_same_device("add_", dst, src);
  check_floating("add_", dst);
  check_floating("add_", src);
  BRIGADE_CHECK(broadcast_shapes(dst.shape(), src.shape(), "add_") == dst.shape(), "add_: source shape ",
                shape_str(src.shape()), " does not broadcast to destination shape ", shape_str(dst.shape()));
  check_no_self_overlap("add_", dst);
  if (may_overlap(dst, src)) return add_(dst, clone(src), alpha);  // e.g. add_(x, x.transpose(0, 1))
  if (is_half(dst.dtype())) {
    // Accumulate in f32, then round once back into the (possibly strided) destination.
    Tensor acc = to_dtype(dst, DType::f32);
    add_(acc, src, alpha);
    copy_(dst, acc);
    return;
  }
  if (src.dtype() != dst.dtype()) return add_(dst, to_dtype(src, dst.dtype()), alpha);
  check_cpu_backend("add_", dst);
  cpu::add_inplace(dst, src, alpha);
  dst.storage().bump_version();
}

void scale_(const Tensor& dst, double factor) {
  check_defined("scale_", dst, "destination");
  check_floating("scale_", dst);
  check_no_self_overlap("scale_", dst);
  if (is_half(dst.dtype())) {
    copy_(dst, scale_shift(to_dtype(dst, DType::f32), factor, 0));
    return;
  }
  check_cpu_backend("scale_", dst);
  cpu::scale_shift(dst, dst, factor, 0);  // elementwise in place: each element reads then writes itself
  dst.storage().bump_version();
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  check_defined("masked_fill", x, "input");
  check_defined("masked_fill", mask, "mask");
  check_same_device("masked_fill", x, mask);
  BRIGADE_CHECK(broadcast_shapes(x.shape(), mask.shape(), "masked_fill") == x.shape(), "masked_fill: mask shape ",
                shape_str(mask.shape()), " does not broadcast to input shape ", shape_str(x.shape()));
  check_cpu_backend("masked_fill", x);
  Tensor out = empty(x.shape(), x.dtype(), x.device());
  cpu::masked_fill(out, x, mask, value);
  return out;
}

}  // namespace brigade::ops
