#include "kernels/cpu/strided.h"

namespace brigade::cpu {

Strides broadcast_strides(const Tensor& t, const Shape& shape) {
  Strides out(shape.size(), 0);
  size_t lead = shape.size() - size_t(t.dim());
  for (size_t i = 0; i < size_t(t.dim()); ++i)
    out[lead + i] = t.shape()[i] == 1 && shape[lead + i] != 1 ? 0 : t.strides()[i];
  return out;
}

LoopNest coalesce(const Shape& shape, const std::vector<const Tensor*>& operands) {
  const size_t k = operands.size();
  std::vector<Strides> full(k);
  for (size_t j = 0; j < k; ++j) full[j] = broadcast_strides(*operands[j], shape);

  LoopNest nest;
  nest.strides.resize(k);
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;  // a size-1 dim never moves any pointer
    // Dim d continues the previous (outer) dim when, in every operand, stepping the outer dim
    // once is the same as stepping d all the way: then the two are one loop of their product.
    bool merge = !nest.shape.empty();
    for (size_t j = 0; j < k && merge; ++j) merge = nest.strides[j].back() == full[j][d] * shape[d];
    if (merge) {
      nest.shape.back() *= shape[d];
      for (size_t j = 0; j < k; ++j) nest.strides[j].back() = full[j][d];
    } else {
      nest.shape.push_back(shape[d]);
      for (size_t j = 0; j < k; ++j) nest.strides[j].push_back(full[j][d]);
    }
  }
  if (nest.shape.empty()) {  // a single element
    nest.shape = {1};
    for (size_t j = 0; j < k; ++j) nest.strides[j] = {0};
  }
  return nest;
}

}  // namespace brigade::cpu
