// Differentiable embedding (a row lookup). It saves only the indices, checked once in the forward.
#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "autograd/functions/unmodified.h"
#include "autograd/tape.h"
#include "kernels/ops.h"

namespace brigade {

using detail::check_unmodified;

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  ops::CheckedIndices checked;  // the backward skips the scan while `indices` stays unwritten
  Tensor out = ops::embedding(weight, indices, &checked);
  const int64_t rows = weight.size(0);
  record("embedding", {weight}, {out}, [checked, rows](const std::vector<Tensor>& g, const std::vector<bool>&) {
    check_unmodified("embedding", checked, "indices");
    return std::vector<Tensor>{ops::embedding_backward(g[0], checked.source, rows, &checked)};
  });
  return autocast(out);  // the rows looked up, not the whole table, are converted
}

}  // namespace brigade
