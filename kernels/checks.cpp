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

void check_cpu_backend(const char* op, const Tensor& x) {
  BRIGADE_CHECK(x.device().is_cpu(), op, ": no kernel for device ", x.device().str(),
                " in this build (the CUDA backend is not available)");
}

}  // namespace brigade::ops
