// ops: concat. No kernel of its own: each input is copied into its slice of the output.
#include "kernels/ops.h"

namespace brigade::ops {

Tensor concat(const std::vector<Tensor>& xs, int64_t dim) {
  BRIGADE_CHECK(!xs.empty(), "concat: expected at least one tensor, got an empty list");
  for (size_t i = 0; i < xs.size(); ++i)
    BRIGADE_CHECK(xs[i].defined(), "concat: tensor ", i, " is an undefined tensor");
  const Tensor& first = xs[0];
  BRIGADE_CHECK(first.dim() > 0, "concat: tensor 0 is 0-dimensional; only tensors with dims can be concatenated");
  const int64_t d = wrap_dim(dim, first.dim(), "concat");

  Shape shape = first.shape();
  shape[size_t(d)] = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Tensor& x = xs[i];
    BRIGADE_CHECK(x.dtype() == first.dtype(), "concat: tensor ", i, " has dtype ", dtype_name(x.dtype()),
                  " but tensor 0 has ", dtype_name(first.dtype()));
    BRIGADE_CHECK(x.device() == first.device(), "concat: tensor ", i, " is on ", x.device().str(),
                  " but tensor 0 is on ", first.device().str());
    bool fits = x.dim() == first.dim();
    for (size_t k = 0; fits && k < size_t(x.dim()); ++k) fits = int64_t(k) == d || x.shape()[k] == first.shape()[k];
    BRIGADE_CHECK(fits, "concat: tensor ", i, " has shape ", shape_str(x.shape()), " but tensor 0 has shape ",
                  shape_str(first.shape()), "; shapes must match except in dim ", d);
    shape[size_t(d)] += x.shape()[size_t(d)];
  }

  Tensor out = empty(shape, first.dtype(), first.device());
  const Strides& strides = out.strides();
  int64_t start = 0;
  for (const Tensor& x : xs) {
    // The slice [start, start + size) of out along d: same strides, shifted offset.
    copy_(make_view(out, x.shape(), strides, start * strides[size_t(d)]), x);
    start += x.shape()[size_t(d)];
  }
  return out;
}

}  // namespace brigade::ops
