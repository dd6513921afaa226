// ops: dropout and its backward — one kernel, since both multiply by the same recomputed mask.
#include "kernels/cpu/kernels.h"
#include "kernels/ops.h"

namespace brigade::ops {
namespace {

Tensor apply_mask(const char* op, const Tensor& x, double p, uint64_t seed, uint64_t offset) {
  check_defined(op, x, "input");
  check_floating(op, x);
  BRIGADE_CHECK(p >= 0.0 && p < 1.0, op, ": p must be in [0, 1), got ", p);
  check_cpu_backend(op, x);
  const DType compute = x.dtype() == DType::f64 ? DType::f64 : DType::f32;
  if (p == 0.0) return clone(x);  // identity, but still a fresh tensor like every op's output
  Tensor out = empty(x.shape(), compute, x.device());
  cpu::dropout(out, contiguous(to_dtype(x, compute)), p, seed, offset);
  return to_dtype(out, x.dtype());
}

}  // namespace

Tensor dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset) {
  return apply_mask("dropout", x, p, seed, offset);
}

Tensor dropout_backward(const Tensor& grad_y, double p, uint64_t seed, uint64_t offset) {
  return apply_mask("dropout_backward", grad_y, p, seed, offset);
}

}  // namespace brigade::ops
