// ops: dropout and its backward — one kernel, since both multiply by the same recomputed mask.
#include "kernels/dispatch.h"
#include "kernels/ops.h"

namespace brigade::ops {
namespace {

Tensor apply_mask(const char* op, const Tensor& x, double p, uint64_t seed, uint64_t offset) {
  check_defined(op, x, "input");
  check_floating(op, x);
  BRIGADE_CHECK(p >= 0.0 && p < 1.0, op, ": p must be in [0, 1), got ", p);
  if (p == 0.0) return clone(x);  // identity, but still a fresh tensor like every op's output
  // The CPU reference computes bf16/f16 in f32 copies; CUDA kernels take them directly.
  const DType t = x.device().is_cpu() && is_half(x.dtype()) ? DType::f32 : x.dtype();
  const Tensor in = contiguous(to_dtype(x, t));
  Tensor out = empty(x.shape(), t, x.device());
  BRIGADE_DISPATCH(op, x, dropout(out, in, p, seed, offset));
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
