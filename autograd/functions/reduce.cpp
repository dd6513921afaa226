// Differentiable reductions. Summing is broadcasting run backwards: every input element that went
// into an output receives that output's gradient, so sum's backward is an expand (a stride-0 view,
// no copy) and mean's is the same scaled by 1/count. max sends the gradient to the argmax only.
#include <algorithm>

#include "autograd/functions.h"
#include "autograd/tape.h"
#include "kernels/ops.h"

namespace brigade {
namespace {

// Wrapped, sorted, de-duplicated dims (empty = all) — what the gradient needs to put them back.
std::vector<int64_t> normalized_dims(const std::vector<int64_t>& dims, int64_t ndim) {
  std::vector<int64_t> out;
  if (dims.empty()) {
    for (int64_t d = 0; d < ndim; ++d) out.push_back(d);
    return out;
  }
  if (ndim == 0) return out;
  for (int64_t d : dims) out.push_back(wrap_dim(d, ndim, "sum"));
  std::sort(out.begin(), out.end());
  return out;
}

// The gradient of a sum: g (the reduced shape) broadcast back over the reduced dims of `shape`.
Tensor expand_back(const Tensor& g, const Shape& shape, const std::vector<int64_t>& dims, bool keepdim) {
  Tensor grad = g;
  if (!keepdim)
    for (int64_t d : dims) grad = grad.unsqueeze(d);  // ascending, so each d lands where it was
  return grad.expand(shape);
}

Tensor sum_or_mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, bool mean) {
  Tensor y = mean ? ops::mean(x, dims, keepdim) : ops::sum(x, dims, keepdim);
  if (!should_record({x})) return y;
  const std::vector<int64_t> reduced = normalized_dims(dims, x.dim());
  const Shape shape = x.shape();
  record(mean ? "mean" : "sum", {x}, {y}, [=](const std::vector<Tensor>& g, const std::vector<bool>&) {
    Tensor grad = expand_back(g[0], shape, reduced, keepdim);
    if (mean) {
      int64_t count = 1;
      for (int64_t d : reduced) count *= shape[size_t(d)];
      grad = ops::scale_shift(grad, 1.0 / double(count), 0.0);
    }
    return std::vector<Tensor>{grad};
  });
  return y;
}

}  // namespace

Tensor sum(const Tensor& x) { return sum_or_mean(x, {}, false, false); }
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) { return sum_or_mean(x, dims, keepdim, false); }
Tensor mean(const Tensor& x) { return sum_or_mean(x, {}, false, true); }
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) { return sum_or_mean(x, dims, keepdim, true); }

Tensor max(const Tensor& x, int64_t dim, bool keepdim) {
  auto [values, indices] = ops::max(x, dim, keepdim);
  const Shape shape = x.shape();
  record("max", {x}, {values}, [=](const std::vector<Tensor>& g, const std::vector<bool>&) {
    return std::vector<Tensor>{ops::max_backward(g[0], indices, shape, dim, keepdim)};
  });
  return values;
}

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) { return ops::argmax(x, dim, keepdim); }

}  // namespace brigade
