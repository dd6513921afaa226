// ops: sum, mean, max, argmax, sum_to, max_backward.
#include <cmath>

#include "core/factory.h"
#include "kernels/cpu/kernels.h"
#include "kernels/dispatch.h"
#include "kernels/ops.h"
#if BRIGADE_HAVE_CUDA
#include "kernels/cuda/kernels.h"
#endif

namespace brigade::ops {
namespace {

// Which dims of an ndim-dim tensor `dims` names (empty = all of them), checked: in range, no repeats.
std::vector<bool> reduced_dims(const char* op, const std::vector<int64_t>& dims, int64_t ndim) {
  std::vector<bool> reduced(size_t(ndim), dims.empty());
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, ndim, op);
    if (ndim == 0) continue;  // a scalar has no dim to reduce; wrap_dim has checked d is 0 or -1
    BRIGADE_CHECK(!reduced[size_t(w)], op, ": dim ", d, " appears more than once in ", shape_str(dims));
    reduced[size_t(w)] = true;
  }
  return reduced;
}

// The result shape: reduced dims become 1 (keepdim) or disappear.
Shape reduced_shape(const Shape& shape, const std::vector<bool>& reduced, bool keepdim) {
  Shape out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!reduced[d]) out.push_back(shape[d]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

// A view of t with a size-1 dim inserted at d (no autograd: the op layer never records).
Tensor insert_dim(const Tensor& t, int64_t d) {
  Shape shape = t.shape();
  Strides strides = t.strides();
  shape.insert(shape.begin() + d, 1);
  strides.insert(strides.begin() + d, 0);
  return make_view(t, shape, strides, t.offset());
}

// sum and mean share everything but the scale.
Tensor sum_scaled(const char* op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, bool mean) {
  check_defined(op, x, "input");
  check_floating(op, x);
  const std::vector<bool> reduced = reduced_dims(op, dims, x.dim());
  // The CPU sums bf16/f16 in f32 copies; CUDA kernels read them directly and accumulate in f32.
  if (x.device().is_cpu() && is_half(x.dtype()))
    return to_dtype(sum_scaled(op, to_dtype(x, DType::f32), dims, keepdim, mean), x.dtype());
  int64_t count = 1;
  for (size_t d = 0; d < reduced.size(); ++d)
    if (reduced[d]) count *= x.shape()[d];
  Tensor out = empty(reduced_shape(x.shape(), reduced, keepdim), x.dtype(), x.device());
  // The mean of nothing is 0/0: NaN, as in NumPy and PyTorch.
  const double scale = !mean ? 1.0 : count == 0 ? std::nan("") : 1.0 / double(count);
  BRIGADE_DISPATCH(op, x, sum(out, x, reduced, scale));
  return out;
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return sum_scaled("sum", x, dims, keepdim, false);
}

Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return sum_scaled("mean", x, dims, keepdim, true);
}

std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  check_defined("max", x, "input");
  const int64_t d = wrap_dim(dim, x.dim(), "max");
  BRIGADE_CHECK(x.dim() == 0 || x.shape()[size_t(d)] > 0, "max: cannot take the maximum over dim ", dim,
                " of size 0 (input shape ", shape_str(x.shape()), ")");
  if (x.device().is_cpu() && is_half(x.dtype())) {  // compare in f32; the values narrow back exactly
    auto [values, indices] = max(to_dtype(x, DType::f32), dim, keepdim);
    return {to_dtype(values, x.dtype()), indices};
  }
  std::vector<bool> reduced(size_t(x.dim()), false);
  if (x.dim() > 0) reduced[size_t(d)] = true;
  const Shape shape = reduced_shape(x.shape(), reduced, keepdim);
  Tensor values = empty(shape, x.dtype(), x.device());
  Tensor indices = empty(shape, DType::i64, x.device());
  BRIGADE_DISPATCH("max", x, max(values, indices, x, d));
  return {values, indices};
}

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  check_defined("argmax", x, "input");
  wrap_dim(dim, x.dim(), "argmax");  // so errors name argmax rather than max
  return max(x, dim, keepdim).second;
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  check_defined("sum_to", x, "input");
  // `shape` must broadcast to x's shape: aligned from the right, each of its dims equal or 1.
  const size_t lead = size_t(x.dim()) >= shape.size() ? size_t(x.dim()) - shape.size() : 0;
  bool fits = shape.size() <= size_t(x.dim());
  for (size_t i = 0; fits && i < shape.size(); ++i) fits = shape[i] == x.shape()[lead + i] || shape[i] == 1;
  BRIGADE_CHECK(fits, "sum_to: shape ", shape_str(shape), " does not broadcast to the input shape ",
                shape_str(x.shape()), ", so the input cannot be summed down to it");
  if (x.shape() == shape) return x;
  // Sum the leading dims broadcasting added, and the dims it stretched from 1; then drop the leading ones.
  std::vector<int64_t> dims;
  for (size_t d = 0; d < size_t(x.dim()); ++d)
    if (d < lead || (shape[d - lead] == 1 && x.shape()[d] != 1)) dims.push_back(int64_t(d));
  Tensor out = sum_scaled("sum_to", x, dims, /*keepdim=*/true, /*mean=*/false);
  return make_view(out, shape, contiguous_strides(shape), out.offset());
}

Tensor max_backward(const Tensor& grad, const Tensor& indices, const Shape& input_shape, int64_t dim, bool keepdim) {
  check_defined("max_backward", grad, "grad");
  check_defined("max_backward", indices, "indices");
  check_same_device("max_backward", grad, indices);
  BRIGADE_CHECK(indices.dtype() == DType::i64, "max_backward: indices must be i64, got ", dtype_name(indices.dtype()));
  const int64_t ndim = int64_t(input_shape.size());
  const int64_t d = wrap_dim(dim, ndim, "max_backward");
  std::vector<bool> reduced(size_t(ndim), false);
  if (ndim > 0) reduced[size_t(d)] = true;
  const Shape expected = reduced_shape(input_shape, reduced, keepdim);
  BRIGADE_CHECK(grad.shape() == expected && indices.shape() == expected, "max_backward: grad shape ",
                shape_str(grad.shape()), " and indices shape ", shape_str(indices.shape()),
                " must both be ", shape_str(expected), " (input shape ", shape_str(input_shape), ", dim ", dim, ")");
  if (ndim == 0) return clone(grad);  // a scalar is its own maximum
  const int64_t size = input_shape[size_t(d)];
  IndexScan scan;
  BRIGADE_DISPATCH("max_backward", indices, scan_indices(scan, contiguous(indices), size, std::nullopt));
  BRIGADE_CHECK(scan.bad_position < 0, "max_backward: index ", scan.bad_value, " is out of range for dim ", dim,
                " of size ", size);
  Tensor grad_x = zeros(input_shape, grad.dtype(), grad.device());
  const Tensor g = keepdim ? grad : insert_dim(grad, d), idx = keepdim ? indices : insert_dim(indices, d);
  BRIGADE_DISPATCH("max_backward", grad, max_backward(grad_x, g, idx, d));
  return grad_x;
}

}  // namespace brigade::ops
