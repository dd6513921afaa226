// ops: softmax, log_softmax and their backward kernels, over any dim.
#include "kernels/cpu/kernels.h"
#include "kernels/ops.h"

namespace brigade::ops {
namespace {

using LineKernel = void (*)(const Tensor& out, const Tensor& in, int64_t dim);
using LineBackwardKernel = void (*)(const Tensor& grad_x, const Tensor& grad_y, const Tensor& y, int64_t dim);

// A 0-dim tensor is one line of one element: the kernels see it as shape [1].
Tensor as_line(const Tensor& t) { return t.dim() == 0 ? make_view(t, {1}, {1}, t.offset()) : t; }

Tensor forward(const char* op, LineKernel kernel, const Tensor& x, int64_t dim) {
  check_defined(op, x, "input");
  check_floating(op, x);
  const int64_t d = wrap_dim(dim, x.dim(), op);
  if (is_half(x.dtype())) return to_dtype(forward(op, kernel, to_dtype(x, DType::f32), dim), x.dtype());
  check_cpu_backend(op, x);
  Tensor y = empty(x.shape(), x.dtype(), x.device());
  kernel(as_line(y), as_line(x), d);
  return y;
}

Tensor backward(const char* op, LineBackwardKernel kernel, const Tensor& grad_y, const Tensor& y, int64_t dim) {
  check_defined(op, grad_y, "grad_y");
  check_defined(op, y, "output");
  check_same_device(op, grad_y, y);
  check_floating(op, grad_y);
  check_floating(op, y);
  BRIGADE_CHECK(grad_y.shape() == y.shape(), op, ": grad shape ", shape_str(grad_y.shape()),
                " differs from output shape ", shape_str(y.shape()));
  const int64_t d = wrap_dim(dim, y.dim(), op);
  // The gradient takes y's dtype; half or mixed inputs compute in f32 (or y's f32/f64).
  const DType t = is_half(y.dtype()) ? DType::f32 : y.dtype();
  if (grad_y.dtype() != t || y.dtype() != t)
    return to_dtype(backward(op, kernel, to_dtype(grad_y, t), to_dtype(y, t), dim), y.dtype());
  check_cpu_backend(op, y);
  Tensor grad_x = empty(y.shape(), y.dtype(), y.device());
  kernel(as_line(grad_x), as_line(grad_y), as_line(y), d);
  return grad_x;
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return forward("softmax", cpu::softmax, x, dim); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return forward("log_softmax", cpu::log_softmax, x, dim); }

Tensor softmax_backward(const Tensor& grad_y, const Tensor& y, int64_t dim) {
  return backward("softmax_backward", cpu::softmax_backward, grad_y, y, dim);
}

Tensor log_softmax_backward(const Tensor& grad_y, const Tensor& y, int64_t dim) {
  return backward("log_softmax_backward", cpu::log_softmax_backward, grad_y, y, dim);
}

}  // namespace brigade::ops
