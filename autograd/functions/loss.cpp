// Differentiable cross_entropy. It saves only what its backward kernel needs: the per-row
// log-sum-exp and the checked targets.
#include "autograd/functions.h"
#include "autograd/functions/unmodified.h"
#include "autograd/tape.h"
#include "kernels/ops.h"

namespace brigade {

using detail::check_unmodified;

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index, ops::Reduction reduction) {
  ops::CrossEntropyOutput out = ops::cross_entropy(logits, targets, ignore_index, reduction);
  if (!should_record({logits})) return out.loss;
  ops::CrossEntropyOutput saved{Tensor(), out.lse, out.count, out.targets};  // the loss itself isn't needed
  record("cross_entropy", {logits}, {out.loss},
         [logits, targets, saved, ignore_index, reduction](const std::vector<Tensor>& g, const std::vector<bool>&) {
           check_unmodified("cross_entropy", saved.targets, "targets");
           return std::vector<Tensor>{
               ops::cross_entropy_backward(g[0], logits, targets, saved, ignore_index, reduction)};
         });
  return out.loss;
}

}  // namespace brigade
