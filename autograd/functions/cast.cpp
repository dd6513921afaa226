// Differentiable dtype conversion: the link between f32 master weights and bf16 compute.
//
// Forward converts (one rounding, round-to-nearest-even); backward converts the gradient back to the
// input's dtype. So a bf16 forward of an f32 parameter hands the parameter an f32 gradient, and the
// tape adds the micro-batches' gradients in f32 (see autograd/autocast.h).
#include "autograd/functions.h"
#include "autograd/tape.h"
#include "kernels/ops.h"

namespace brigade {

Tensor to_dtype(const Tensor& x, DType dtype) {
  BRIGADE_CHECK(x.defined(), "to_dtype: the input is undefined");
  if (x.dtype() == dtype) return x;  // no copy, no tape node: the gradient flows straight through
  const bool both_floating = is_floating(x.dtype()) && is_floating(dtype);
  Tensor y = ops::to_dtype(x, dtype);
  if (both_floating) {  // integers carry no gradient
    const DType from = x.dtype();
    record("to_dtype", {x}, {y}, [from](const std::vector<Tensor>& g, const std::vector<bool>&) {
      return std::vector<Tensor>{ops::to_dtype(g[0], from)};
    });
  }
  return y;
}

}  // namespace brigade
