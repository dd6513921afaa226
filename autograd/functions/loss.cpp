// Differentiable embedding, cross_entropy and dropout. Each saves only what its backward kernel
// needs: the indices, the per-row log-sum-exp, or nothing at all (dropout recomputes its mask from
// the seed and offset).
#include "autograd/functions.h"
#include "autograd/tape.h"
#include "core/rng.h"
#include "kernels/ops.h"

namespace brigade {
namespace {

// Indices are not inputs the tape tracks (they get no gradient), so this is its in-place check for
// them: a backward with indices changed since the forward would pair this forward's activations
// with other rows or targets — a wrong gradient, not an error, unless refused here.
void check_unmodified(const char* op, const ops::CheckedIndices& checked, const char* what) {
  BRIGADE_CHECK(checked.source_storage.version() == checked.source_version, "backward of ", op, ": its ", what,
                " (shape ", shape_str(checked.source.shape()), ") were modified in place after ", op,
                " used them; clone them before modifying them");
}

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  ops::CheckedIndices checked;  // the backward skips the scan while `indices` stays unwritten
  Tensor out = ops::embedding(weight, indices, &checked);
  const int64_t rows = weight.size(0);
  record("embedding", {weight}, {out}, [checked, rows](const std::vector<Tensor>& g, const std::vector<bool>&) {
    check_unmodified("embedding", checked, "indices");
    return std::vector<Tensor>{ops::embedding_backward(g[0], checked.source, rows, &checked)};
  });
  return out;
}

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

Tensor dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset) {
  Tensor out = ops::dropout(x, p, seed, offset);
  record("dropout", {x}, {out}, [p, seed, offset](const std::vector<Tensor>& g, const std::vector<bool>&) {
    return std::vector<Tensor>{ops::dropout_backward(g[0], p, seed, offset)};
  });
  return out;
}

Tensor dropout(const Tensor& x, double p, bool training) {
  if (!training) return x;
  // Take this call's block of counters from the default generator, so consecutive dropouts use
  // disjoint random streams and a run is reproducible from manual_seed.
  ops::check_defined("dropout", x, "input");
  Generator& gen = default_generator();
  const uint64_t seed = gen.seed;
  const uint64_t offset = gen.advance(uint64_t(x.numel()));
  return dropout(x, p, seed, offset);
}

}  // namespace brigade
