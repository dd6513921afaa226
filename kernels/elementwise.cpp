// ops: elementwise. This file is the model for every op in kernels/: check once, bring inputs to the
// dtype the device's kernels compute in, allocate the output, dispatch on device.
#include "core/factory.h"
#include "kernels/dispatch.h"
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

// The dtype kernels compute a tensor of dtype x.dtype() in on x's device: the CPU reference has no
// 16-bit arithmetic and computes bf16/f16 in f32 (the op rounds the result back once); CUDA kernels
// read and write bf16/f16 themselves, computing in f32 registers. Either way a 16-bit result is the
// f32 computation on the widened inputs, rounded once.
DType kernel_dtype(const Tensor& x) { return x.device().is_cpu() && is_half(x.dtype()) ? DType::f32 : x.dtype(); }

Tensor as(const Tensor& x, DType t) { return to_dtype(x, t); }

}  // namespace

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  const char* name = binary_op_name(op);
  check_defined(name, a, "a");
  check_defined(name, b, "b");
  check_same_device(name, a, b);
  check_same_dtype(name, a, b);
  check_floating(name, a);
  Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  const DType t = kernel_dtype(a);
  if (t != a.dtype()) return as(binary(op, as(a, t), as(b, t)), a.dtype());
  Tensor out = empty(shape, a.dtype(), a.device());
  BRIGADE_DISPATCH(name, a, binary(op, out, a, b));
  return out;
}

Tensor unary(UnaryOp op, const Tensor& x) {
  const char* name = unary_op_name(op);
  check_defined(name, x, "input");
  check_floating(name, x);
  const DType t = kernel_dtype(x);
  if (t != x.dtype()) return as(unary(op, as(x, t)), x.dtype());
  Tensor out = empty(x.shape(), x.dtype(), x.device());
  BRIGADE_DISPATCH(name, x, unary(op, out, x));
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
  // The gradient takes x's dtype; mixed inputs are first brought to the kernel's dtype.
  const DType t = kernel_dtype(x);
  if (x.dtype() != t || grad_y.dtype() != t || y.dtype() != t)
    return as(unary_backward(op, as(grad_y, t), as(x, t), as(y, t)), x.dtype());
  Tensor grad_x = empty(x.shape(), x.dtype(), x.device());
  BRIGADE_DISPATCH(name, x, unary_backward(op, grad_x, grad_y, x, y));
  return grad_x;
}

Tensor scale_shift(const Tensor& x, double scale, double shift) {
  check_defined("scale_shift", x, "input");
  check_floating("scale_shift", x);
  const DType t = kernel_dtype(x);
  if (t != x.dtype()) return as(scale_shift(as(x, t), scale, shift), x.dtype());
  Tensor out = empty(x.shape(), x.dtype(), x.device());
  BRIGADE_DISPATCH("scale_shift", x, scale_shift(out, x, scale, shift));
  return out;
}

Tensor pow_scalar(const Tensor& x, double exponent) {
  check_defined("pow", x, "input");
  check_floating("pow", x);
  const DType t = kernel_dtype(x);
  if (t != x.dtype()) return as(pow_scalar(as(x, t), exponent), x.dtype());
  Tensor out = empty(x.shape(), x.dtype(), x.device());
  BRIGADE_DISPATCH("pow", x, pow_scalar(out, x, exponent));
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
  const DType t = kernel_dtype(x);
  if (x.dtype() != t || grad_y.dtype() != t)
    return as(pow_scalar_backward(as(grad_y, t), as(x, t), exponent), x.dtype());
  Tensor grad_x = empty(x.shape(), x.dtype(), x.device());
  BRIGADE_DISPATCH("pow_backward", x, pow_scalar_backward(grad_x, grad_y, x, exponent));
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
  if (kernel_dtype(dst) != dst.dtype()) {
    // CPU, 16-bit dst: accumulate in f32, then round once back into the (possibly strided) destination.
    Tensor acc = to_dtype(dst, DType::f32);
    add_(acc, src, alpha);
    copy_(dst, acc);
    return;
  }
  // The source joins in dst's dtype; a 16-bit dst on a GPU also takes f32 directly (the kernel adds
  // in f32 and rounds once, as the CPU path above does).
  const DType src_dtype = is_half(dst.dtype()) && src.dtype() != dst.dtype() ? DType::f32 : dst.dtype();
  if (src.dtype() != src_dtype) return add_(dst, to_dtype(src, src_dtype), alpha);
  BRIGADE_DISPATCH("add_", dst, add_inplace(dst, src, alpha));
  dst.storage().bump_version();
}

void scale_(const Tensor& dst, double factor) {
  check_defined("scale_", dst, "destination");
  check_floating("scale_", dst);
  check_no_self_overlap("scale_", dst);
  if (kernel_dtype(dst) != dst.dtype()) {
    copy_(dst, scale_shift(to_dtype(dst, DType::f32), factor, 0));
    return;
  }
  // Elementwise in place: each element reads then writes itself.
  BRIGADE_DISPATCH("scale_", dst, scale_shift(dst, dst, factor, 0));
  dst.storage().bump_version();
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  check_defined("masked_fill", x, "input");
  check_defined("masked_fill", mask, "mask");
  check_same_device("masked_fill", x, mask);
  BRIGADE_CHECK(broadcast_shapes(x.shape(), mask.shape(), "masked_fill") == x.shape(), "masked_fill: mask shape ",
                shape_str(mask.shape()), " does not broadcast to input shape ", shape_str(x.shape()));
  Tensor out = empty(x.shape(), x.dtype(), x.device());
  BRIGADE_DISPATCH("masked_fill", x, masked_fill(out, x, mask, value));
  return out;
}

}  // namespace brigade::ops
