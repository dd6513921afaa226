// Differentiable concat, stack and split.
//
// concat copies; its backward hands each input the slice of the gradient that came from it.
// split is the reverse and copies nothing: each piece is a narrow() view, and views are already
// differentiable. stack is concat of unsqueezed views.
#include <algorithm>

#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "autograd/tape.h"
#include "kernels/ops.h"

namespace brigade {

Tensor concat(const std::vector<Tensor>& xs_in, int64_t dim) {
  // Like a binary op: f32 pieces join 16-bit ones in their dtype under a scope.
  std::vector<Tensor> xs = xs_in;
  const bool any_half = std::any_of(xs.begin(), xs.end(), [](const Tensor& x) { return x.defined() && is_half(x.dtype()); });
  if (any_half)
    for (Tensor& x : xs) x = autocast(x);
  Tensor out = ops::concat(xs, dim);
  const int64_t d = wrap_dim(dim, out.dim(), "concat");
  std::vector<int64_t> sizes;
  for (const Tensor& x : xs) sizes.push_back(x.shape()[size_t(d)]);
  record("concat", xs, {out}, [d, sizes](const std::vector<Tensor>& g, const std::vector<bool>& want) {
    std::vector<Tensor> grads(sizes.size());
    int64_t start = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (want[i]) grads[i] = g[0].narrow(d, start, sizes[i]);
      start += sizes[i];
    }
    return grads;
  });
  return out;
}

Tensor stack(const std::vector<Tensor>& xs, int64_t dim) {
  BRIGADE_CHECK(!xs.empty(), "stack: expected at least one tensor, got an empty list");
  for (size_t i = 0; i < xs.size(); ++i) {
    BRIGADE_CHECK(xs[i].defined(), "stack: tensor ", i, " is an undefined tensor");
    BRIGADE_CHECK(xs[i].shape() == xs[0].shape(), "stack: tensor ", i, " has shape ", shape_str(xs[i].shape()),
                  " but tensor 0 has shape ", shape_str(xs[0].shape()), "; stacked tensors must have equal shapes");
  }
  const int64_t ndim = xs[0].dim() + 1;  // the result has one more dim
  BRIGADE_CHECK(dim >= -ndim && dim < ndim, "stack: dim ", dim, " is out of range for stacking tensors with ",
                ndim - 1, " dimensions (expected ", -ndim, "..", ndim - 1, ")");
  std::vector<Tensor> parts;
  for (const Tensor& x : xs) parts.push_back(x.unsqueeze(dim));
  return concat(parts, dim);
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  BRIGADE_CHECK(x.dim() > 0, "split: expected a tensor with at least one dimension, got a 0-dimensional tensor");
  const int64_t d = wrap_dim(dim, x.dim(), "split");
  int64_t total = 0;
  for (int64_t s : sizes) {
    BRIGADE_CHECK(s >= 0, "split: negative size ", s, " in ", shape_str(sizes));
    total += s;
  }
  BRIGADE_CHECK(total == x.shape()[size_t(d)], "split: sizes ", shape_str(sizes), " add up to ", total,
                " but dim ", dim, " of shape ", shape_str(x.shape()), " has size ", x.shape()[size_t(d)]);
  std::vector<Tensor> pieces;
  int64_t start = 0;
  for (int64_t s : sizes) {
    pieces.push_back(x.narrow(d, start, s));
    start += s;
  }
  return pieces;
}

std::vector<Tensor> split(const Tensor& x, int64_t chunk_size, int64_t dim) {
  BRIGADE_CHECK(chunk_size > 0, "split: chunk size must be positive, got ", chunk_size);
  BRIGADE_CHECK(x.dim() > 0, "split: expected a tensor with at least one dimension, got a 0-dimensional tensor");
  const int64_t n = x.shape()[size_t(wrap_dim(dim, x.dim(), "split"))];
  std::vector<int64_t> sizes;
  for (int64_t start = 0; start < n; start += chunk_size) sizes.push_back(std::min(chunk_size, n - start));
  if (sizes.empty()) sizes.push_back(0);  // an empty dim splits into one empty piece
  return split(x, sizes, dim);
}

}  // namespace brigade
