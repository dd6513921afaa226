// ops: copy_, fill_, contiguous, clone, to_dtype.
#include "kernels/cpu/kernels.h"
#include "kernels/ops.h"

namespace brigade::ops {

void copy_(const Tensor& dst, const Tensor& src) {
  check_defined("copy_", dst, "destination");
  check_defined("copy_", src, "source");
  check_same_device("copy_", dst, src);
  Shape b = broadcast_shapes(dst.shape(), src.shape(), "copy_");
  BRIGADE_CHECK(b == dst.shape(), "copy_: source shape ", shape_str(src.shape()),
                " does not broadcast to destination shape ", shape_str(dst.shape()));
  check_no_self_overlap("copy_", dst);
  if (may_overlap(dst, src)) return copy_(dst, clone(src));  // e.g. shifting a tensor by one
  check_cpu_backend("copy_", dst);
  cpu::copy(dst, src);
  dst.storage().bump_version();
}

void fill_(const Tensor& dst, double value) {
  check_defined("fill_", dst, "destination");
  check_cpu_backend("fill_", dst);
  cpu::fill(dst, value);
  dst.storage().bump_version();
}

Tensor contiguous(const Tensor& x) { return x.is_contiguous() ? x : clone(x); }

Tensor clone(const Tensor& x) {
  check_defined("clone", x, "input");
  Tensor out = empty(x.shape(), x.dtype(), x.device());
  copy_(out, x);
  return out;
}

Tensor to_dtype(const Tensor& x, DType dtype) {
  check_defined("to", x, "input");
  if (x.dtype() == dtype) return x;
  Tensor out = empty(x.shape(), dtype, x.device());
  copy_(out, x);
  return out;
}

}  // namespace brigade::ops
