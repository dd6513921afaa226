// Argument checks shared by every op: one wording for each kind of mistake.
#include "kernels/ops.h"

namespace brigade::ops {

void check_defined(const char* op, const Tensor& x, const char* name) {
  BRIGADE_CHECK(x.defined(), op, ": ", name, " is an undefined tensor");
}

void check_same_device(const char* op, const Tensor& a, const Tensor& b) {
  BRIGADE_CHECK(a.device() == b.device(), op, ": tensors on different devices: ", a.device().str(), " and ",
                b.device().str());
}

void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  BRIGADE_CHECK(a.dtype() == b.dtype(), op, ": dtypes differ: ", dtype_name(a.dtype()), " and ", dtype_name(b.dtype()));
}

void check_floating(const char* op, const Tensor& x) {
  BRIGADE_CHECK(is_floating(x.dtype()), op, ": expected a floating-point tensor, got ", dtype_name(x.dtype()));
}

void check_no_self_overlap(const char* op, const Tensor& dst) {
  for (int64_t d = 0; d < dst.dim(); ++d)
    BRIGADE_CHECK(!(dst.shape()[size_t(d)] > 1 && dst.strides()[size_t(d)] == 0), op,
                  ": destination has overlapping elements (an expanded view: shape ", shape_str(dst.shape()),
                  ", strides ", shape_str(dst.strides()), ")");
}

namespace {
// [first, last] element offsets a view can touch.
std::pair<int64_t, int64_t> element_span(const Tensor& t) {
  int64_t lo = t.offset(), hi = t.offset();
  for (int64_t d = 0; d < t.dim(); ++d) {
    int64_t reach = (t.shape()[size_t(d)] - 1) * t.strides()[size_t(d)];
    (reach < 0 ? lo : hi) += reach;
  }
  return {lo, hi};
}
}  // namespace

bool may_overlap(const Tensor& a, const Tensor& b) {
  if (!a.storage().same_as(b.storage()) || a.numel() == 0 || b.numel() == 0) return false;
  auto [alo, ahi] = element_span(a);
  auto [blo, bhi] = element_span(b);
  // Same storage implies the same dtype size only if dtypes match; compare in bytes to be safe.
  int64_t ea = int64_t(a.element_size()), eb = int64_t(b.element_size());
  return alo * ea <= (bhi + 1) * eb - 1 && blo * eb <= (ahi + 1) * ea - 1;
}

void check_cpu_backend(const char* op, const Tensor& x) {
  BRIGADE_CHECK(x.device().is_cpu(), op, ": no kernel for device ", x.device().str(),
                " in this build (the CUDA backend is not available)");
}

}  // namespace brigade::ops
