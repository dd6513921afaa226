// ops: softmax, log_softmax and their backward kernels, over any dim.
#include "kernels/dispatch.h"
#include "kernels/ops.h"

namespace brigade::ops {
namespace {

// A 0-dim tensor is one line of one element: the kernels see it as shape [1].
Tensor as_line(const Tensor& t) { return t.dim() == 0 ? make_view(t, {1}, {1}, t.offset()) : t; }

// The CPU reference computes bf16/f16 in f32 copies; CUDA kernels take them directly.
DType kernel_dtype(const Tensor& t) { return t.device().is_cpu() && is_half(t.dtype()) ? DType::f32 : t.dtype(); }

Tensor forward(const char* op, bool log, const Tensor& x, int64_t dim) {
  check_defined(op, x, "input");
  check_floating(op, x);
  const int64_t d = wrap_dim(dim, x.dim(), op);
  const DType t = kernel_dtype(x);
  if (t != x.dtype()) return to_dtype(forward(op, log, to_dtype(x, t), dim), x.dtype());
  Tensor y = empty(x.shape(), x.dtype(), x.device());
  if (log) BRIGADE_DISPATCH(op, x, log_softmax(as_line(y), as_line(x), d));
  else BRIGADE_DISPATCH(op, x, softmax(as_line(y), as_line(x), d));
  return y;
}

Tensor backward(const char* op, bool log, const Tensor& grad_y, const Tensor& y, int64_t dim) {
  check_defined(op, grad_y, "grad_y");
  check_defined(op, y, "output");
  check_same_device(op, grad_y, y);
  check_floating(op, grad_y);
  check_floating(op, y);
  BRIGADE_CHECK(grad_y.shape() == y.shape(), op, ": grad shape ", shape_str(grad_y.shape()),
                " differs from output shape ", shape_str(y.shape()));
  const int64_t d = wrap_dim(dim, y.dim(), op);
  // The gradient takes y's dtype; mixed inputs are brought to the kernel's dtype first.
  const DType t = kernel_dtype(y);
  if (grad_y.dtype() != t || y.dtype() != t)
    return to_dtype(backward(op, log, to_dtype(grad_y, t), to_dtype(y, t), dim), y.dtype());
  Tensor grad_x = empty(y.shape(), y.dtype(), y.device());
  if (log) BRIGADE_DISPATCH(op, y, log_softmax_backward(as_line(grad_x), as_line(grad_y), as_line(y), d));
  else BRIGADE_DISPATCH(op, y, softmax_backward(as_line(grad_x), as_line(grad_y), as_line(y), d));
  return grad_x;
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return forward("softmax", false, x, dim); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return forward("log_softmax", true, x, dim); }

Tensor softmax_backward(const Tensor& grad_y, const Tensor& y, int64_t dim) {
  return backward("softmax_backward", false, grad_y, y, dim);
}

Tensor log_softmax_backward(const Tensor& grad_y, const Tensor& y, int64_t dim) {
  return backward("log_softmax_backward", true, grad_y, y, dim);
}

}  // namespace brigade::ops
