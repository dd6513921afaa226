// ops: conv2d and its three backward kernels (NCHW, weight [O, C, KH, KW], symmetric padding).
//
// All four share one geometry check, conv2d_output_shape, written against shapes only: it is the
// op's contract, independent of whichever kernel (CPU loops, cuDNN, the direct CUDA kernels) runs
// afterwards. The CPU kernels compute in f32/f64, so 16-bit operands are widened for them; the CUDA
// kernels read bf16/f16 directly.
#include <atomic>

#include "core/factory.h"
#include "kernels/dispatch.h"

namespace brigade::ops {
namespace {

// Sliding-window output length: how many window positions fit in the padded input.
int64_t window_count(int64_t in, int64_t kernel, int64_t stride, int64_t padding) {
  return (in + 2 * padding - kernel) / stride + 1;
}

// Checks x and weight shapes and the params; returns the output shape [N, O, OH, OW].
Shape conv2d_output_shape(const char* op, const Shape& x, const Shape& w, Conv2dParams p) {
  BRIGADE_CHECK(x.size() == 4, op, ": expected a 4-D input [N, C, H, W], got shape ", shape_str(x));
  BRIGADE_CHECK(w.size() == 4, op, ": expected a 4-D weight [O, C, KH, KW], got shape ", shape_str(w));
  for (int64_t size : x) BRIGADE_CHECK(size >= 0, op, ": invalid input shape ", shape_str(x));
  for (int64_t size : w) BRIGADE_CHECK(size >= 0, op, ": invalid weight shape ", shape_str(w));
  BRIGADE_CHECK(p.stride >= 1, op, ": stride must be at least 1, got ", p.stride);
  BRIGADE_CHECK(p.padding >= 0, op, ": padding must be non-negative, got ", p.padding);
  BRIGADE_CHECK(x[1] == w[1], op, ": input shape ", shape_str(x), " has ", x[1], " channels but weight shape ",
                shape_str(w), " expects ", w[1]);
  BRIGADE_CHECK(w[2] >= 1 && w[3] >= 1, op, ": weight shape ", shape_str(w), " has an empty kernel");
  int64_t padded_h = x[2] + 2 * p.padding, padded_w = x[3] + 2 * p.padding;
  BRIGADE_CHECK(w[2] <= padded_h && w[3] <= padded_w, op, ": kernel ", w[2], "x", w[3], " (weight shape ",
                shape_str(w), ") is larger than the padded input ", padded_h, "x", padded_w, " (input shape ",
                shape_str(x), ", padding ", p.padding, ")");
  return {x[0], w[0], window_count(x[2], w[2], p.stride, p.padding), window_count(x[3], w[3], p.stride, p.padding)};
}

// The dtype a mixed-precision call computes in: f64 if any operand is f64, else f32 (so bf16/f16
// widen to f32, as everywhere on the CPU).
DType compute_dtype(DType a, DType b) { return a == DType::f64 || b == DType::f64 ? DType::f64 : DType::f32; }

Tensor as(const Tensor& x, DType t) { return to_dtype(x, t); }

// Whether the kernel for x's device needs `t` widened first: the CPU computes in f32/f64 only.
bool widen_for_cpu(const Tensor& x, DType t) { return x.device().is_cpu() && is_half(t); }

// The gradient a backward kernel computes from grad_y and one forward operand: the input's (from
// the weight) or the weight's (from the input).
enum class Gradient { input, weight };

// What the input and weight backward kernels share: the checks, widening for the CPU, and a fresh
// gradient of `grad_shape` in the operand's dtype that `kernel(grad, grad_y, operand)` fills (with
// contiguous operands of one dtype). `operand` is the weight for Gradient::input, the input for
// Gradient::weight.
template <class Kernel>
Tensor backward_of(Gradient gradient, const char* op, const Tensor& grad_y, const Tensor& operand,
                   const Shape& grad_shape, Conv2dParams p, Kernel&& kernel) {
  const bool from_weight = gradient == Gradient::input;
  check_defined(op, grad_y, "grad_y");
  check_defined(op, operand, from_weight ? "weight" : "input");
  check_same_device(op, grad_y, operand);
  check_floating(op, grad_y);
  check_floating(op, operand);
  const Shape& x_shape = from_weight ? grad_shape : operand.shape();
  const Shape& weight_shape = from_weight ? operand.shape() : grad_shape;
  Shape y_shape = conv2d_output_shape(op, x_shape, weight_shape, p);
  BRIGADE_CHECK(grad_y.shape() == y_shape, op, ": grad_y shape ", shape_str(grad_y.shape()),
                " does not match the output shape ", shape_str(y_shape), " of input ", shape_str(x_shape),
                " and weight ", shape_str(weight_shape));
  if (widen_for_cpu(operand, operand.dtype()) || grad_y.dtype() != operand.dtype()) {
    DType t = compute_dtype(grad_y.dtype(), operand.dtype());
    return to_dtype(backward_of(gradient, op, as(grad_y, t), as(operand, t), grad_shape, p, kernel), operand.dtype());
  }
  Tensor grad = empty(grad_shape, operand.dtype(), operand.device());
  kernel(grad, contiguous(grad_y), contiguous(operand));
  return grad;
}

std::atomic<ConvBackend> g_conv_backend{ConvBackend::automatic};

}  // namespace

void set_conv_backend(ConvBackend backend) {
#if !BRIGADE_HAVE_CUDNN
  BRIGADE_CHECK(backend != ConvBackend::cudnn, "set_conv_backend: this build has no cuDNN (the direct CUDA "
                "kernels run instead; choose ConvBackend::direct or automatic)");
#endif
  g_conv_backend.store(backend);
}

ConvBackend conv_backend() { return g_conv_backend.load(); }

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Conv2dParams p) {
  check_defined("conv2d", x, "input");
  check_defined("conv2d", weight, "weight");
  check_same_device("conv2d", x, weight);
  check_same_dtype("conv2d", x, weight);
  check_floating("conv2d", x);
  Shape y_shape = conv2d_output_shape("conv2d", x.shape(), weight.shape(), p);
  if (bias.defined()) {
    check_same_device("conv2d", x, bias);
    check_same_dtype("conv2d", x, bias);
    BRIGADE_CHECK(bias.shape() == Shape{weight.size(0)}, "conv2d: bias shape ", shape_str(bias.shape()),
                  " does not match weight shape ", shape_str(weight.shape()), " (expected [", weight.size(0), "])");
  }
  if (widen_for_cpu(x, x.dtype())) {
    DType t = DType::f32;
    return to_dtype(conv2d(as(x, t), as(weight, t), bias.defined() ? as(bias, t) : Tensor(), p), x.dtype());
  }
  Tensor y = empty(y_shape, x.dtype(), x.device());
  BRIGADE_DISPATCH("conv2d", x,
                   conv2d(y, contiguous(x), contiguous(weight), bias.defined() ? contiguous(bias) : Tensor(), p));
  return y;
}

Tensor conv2d_backward_input(const Tensor& grad_y, const Tensor& weight, const Shape& x_shape, Conv2dParams p) {
  const char* op = "conv2d_backward_input";
  return backward_of(Gradient::input, op, grad_y, weight, x_shape, p,
                     [&](const Tensor& grad_x, const Tensor& gy, const Tensor& w) {
                       BRIGADE_DISPATCH(op, gy, conv2d_backward_input(grad_x, gy, w, p));
                     });
}

Tensor conv2d_backward_weight(const Tensor& grad_y, const Tensor& x, const Shape& weight_shape, Conv2dParams p) {
  const char* op = "conv2d_backward_weight";
  return backward_of(Gradient::weight, op, grad_y, x, weight_shape, p,
                     [&](const Tensor& grad_w, const Tensor& gy, const Tensor& in) {
                       BRIGADE_DISPATCH(op, gy, conv2d_backward_weight(grad_w, gy, in, p));
                     });
}

Tensor conv2d_backward_bias(const Tensor& grad_y) {
  const char* op = "conv2d_backward_bias";
  check_defined(op, grad_y, "grad_y");
  check_floating(op, grad_y);
  BRIGADE_CHECK(grad_y.dim() == 4, op, ": expected a 4-D grad_y [N, O, OH, OW], got shape ",
                shape_str(grad_y.shape()));
  if (widen_for_cpu(grad_y, grad_y.dtype()))
    return to_dtype(conv2d_backward_bias(as(grad_y, DType::f32)), grad_y.dtype());
  Tensor grad_b = empty({grad_y.size(1)}, grad_y.dtype(), grad_y.device());
  BRIGADE_DISPATCH(op, grad_y, conv2d_backward_bias(grad_b, contiguous(grad_y)));
  return grad_b;
}

}  // namespace brigade::ops
