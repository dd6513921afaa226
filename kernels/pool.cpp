// ops: max_pool2d and avg_pool2d with their backward kernels (NCHW, square windows).
//
// Like conv2d, every op here validates its geometry from shapes alone (pool2d_output_shape), so the
// CPU and CUDA kernels share one contract. The CPU kernels compute in f32/f64 (16-bit inputs are
// widened for them); the CUDA kernels read bf16/f16 directly.
#include "core/factory.h"
#include "kernels/dispatch.h"

namespace brigade::ops {
namespace {

// Checks x's shape and the params; returns the output shape [N, C, OH, OW].
Shape pool2d_output_shape(const char* op, const Shape& x, Pool2dParams p) {
  BRIGADE_CHECK(x.size() == 4, op, ": expected a 4-D input [N, C, H, W], got shape ", shape_str(x));
  for (int64_t size : x) BRIGADE_CHECK(size >= 0, op, ": invalid input shape ", shape_str(x));
  BRIGADE_CHECK(x[2] >= 1 && x[3] >= 1, op, ": input shape ", shape_str(x), " has an empty spatial dim");
  BRIGADE_CHECK(p.kernel >= 1, op, ": kernel size must be at least 1, got ", p.kernel);
  BRIGADE_CHECK(p.stride >= 1, op, ": stride must be at least 1, got ", p.stride);
  // At most half the kernel: then every window overlaps the real input (max always has a candidate)
  // and no window reaches past the padding (average divides by exactly kernel^2).
  BRIGADE_CHECK(p.padding >= 0 && 2 * p.padding <= p.kernel, op, ": padding ", p.padding,
                " must be between 0 and half the kernel size ", p.kernel);
  int64_t padded_h = x[2] + 2 * p.padding, padded_w = x[3] + 2 * p.padding;
  BRIGADE_CHECK(p.kernel <= padded_h && p.kernel <= padded_w, op, ": kernel ", p.kernel, "x", p.kernel,
                " is larger than the padded input ", padded_h, "x", padded_w, " (input shape ", shape_str(x),
                ", padding ", p.padding, ")");
  return {x[0], x[1], (padded_h - p.kernel) / p.stride + 1, (padded_w - p.kernel) / p.stride + 1};
}

void check_grad_shape(const char* op, const Tensor& grad_y, const Shape& x_shape, Pool2dParams p) {
  Shape y_shape = pool2d_output_shape(op, x_shape, p);
  BRIGADE_CHECK(grad_y.shape() == y_shape, op, ": grad_y shape ", shape_str(grad_y.shape()),
                " does not match the output shape ", shape_str(y_shape), " of input ", shape_str(x_shape), " (kernel ",
                p.kernel, ", stride ", p.stride, ", padding ", p.padding, ")");
}

// The CPU kernel trusts the indices, so look at them first: each must name a position in its plane.
void check_indices_in_plane(const char* op, const Tensor& indices, int64_t H, int64_t W) {
  const int64_t* id = indices.data<int64_t>();
  for (int64_t i = 0; i < indices.numel(); ++i)
    BRIGADE_CHECK(id[i] >= 0 && id[i] < H * W, op, ": index ", id[i], " at position ", i,
                  " is out of range for a ", H, "x", W, " input plane");
}

}  // namespace

std::pair<Tensor, Tensor> max_pool2d(const Tensor& x, Pool2dParams p) {
  check_defined("max_pool2d", x, "input");
  check_floating("max_pool2d", x);
  Shape y_shape = pool2d_output_shape("max_pool2d", x.shape(), p);
  if (x.device().is_cpu() && is_half(x.dtype())) {  // the max is exact in any precision
    auto [y, indices] = max_pool2d(to_dtype(x, DType::f32), p);
    return {to_dtype(y, x.dtype()), indices};
  }
  Tensor y = empty(y_shape, x.dtype(), x.device());
  Tensor indices = empty(y_shape, DType::i64, x.device());
  BRIGADE_DISPATCH("max_pool2d", x, max_pool2d(y, indices, contiguous(x), p));
  return {y, indices};
}

Tensor max_pool2d_backward(const Tensor& grad_y, const Tensor& indices, const Shape& x_shape, Pool2dParams p) {
  const char* op = "max_pool2d_backward";
  check_defined(op, grad_y, "grad_y");
  check_defined(op, indices, "indices");
  check_same_device(op, grad_y, indices);
  check_floating(op, grad_y);
  BRIGADE_CHECK(indices.dtype() == DType::i64, op, ": indices must be i64, got ", dtype_name(indices.dtype()));
  check_grad_shape(op, grad_y, x_shape, p);
  BRIGADE_CHECK(indices.shape() == grad_y.shape(), op, ": indices shape ", shape_str(indices.shape()),
                " differs from grad_y shape ", shape_str(grad_y.shape()));
  if (grad_y.device().is_cpu() && is_half(grad_y.dtype()))
    return to_dtype(max_pool2d_backward(to_dtype(grad_y, DType::f32), indices, x_shape, p), grad_y.dtype());
  const Tensor idx = contiguous(indices);
  // The CPU kernel scatters through the indices, so bad ones would reach memory: checked there. The
  // CUDA kernel gathers (deterministically), reading indices only to compare them with positions, so
  // they are not checked for it (that would copy them to the host and wait).
  if (grad_y.device().is_cpu()) check_indices_in_plane(op, idx, x_shape[2], x_shape[3]);
  Tensor grad_x = empty(x_shape, grad_y.dtype(), grad_y.device());
  BRIGADE_DISPATCH(op, grad_y, max_pool2d_backward(grad_x, contiguous(grad_y), idx, p));
  return grad_x;
}

Tensor avg_pool2d(const Tensor& x, Pool2dParams p) {
  check_defined("avg_pool2d", x, "input");
  check_floating("avg_pool2d", x);
  Shape y_shape = pool2d_output_shape("avg_pool2d", x.shape(), p);
  if (x.device().is_cpu() && is_half(x.dtype())) return to_dtype(avg_pool2d(to_dtype(x, DType::f32), p), x.dtype());
  Tensor y = empty(y_shape, x.dtype(), x.device());
  BRIGADE_DISPATCH("avg_pool2d", x, avg_pool2d(y, contiguous(x), p));
  return y;
}

Tensor avg_pool2d_backward(const Tensor& grad_y, const Shape& x_shape, Pool2dParams p) {
  const char* op = "avg_pool2d_backward";
  check_defined(op, grad_y, "grad_y");
  check_floating(op, grad_y);
  check_grad_shape(op, grad_y, x_shape, p);
  if (grad_y.device().is_cpu() && is_half(grad_y.dtype()))
    return to_dtype(avg_pool2d_backward(to_dtype(grad_y, DType::f32), x_shape, p), grad_y.dtype());
  Tensor grad_x = empty(x_shape, grad_y.dtype(), grad_y.device());
  BRIGADE_DISPATCH(op, grad_y, avg_pool2d_backward(grad_x, contiguous(grad_y), p));
  return grad_x;
}

}  // namespace brigade::ops
