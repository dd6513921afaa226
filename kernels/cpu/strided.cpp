#include "kernels/cpu/strided.h"

namespace brigade::cpu {

Strides broadcast_strides(const Tensor& t, const Shape& shape) {
  Strides out(shape.size(), 0);
  size_t lead = shape.size() - size_t(t.dim());
  for (size_t i = 0; i < size_t(t.dim()); ++i)
    out[lead + i] = t.shape()[i] == 1 && shape[lead + i] != 1 ? 0 : t.strides()[i];
  return out;
}

}  // namespace brigade::cpu
