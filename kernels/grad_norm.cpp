// ops: sum_of_squares and clip_by_norm_ — global-norm gradient clipping over a list of tensors.
//
// The composed form (per tensor: to f64, square, sum; then add) is the definition, and what the CPU
// runs; on a GPU it would cost four or five launches per tensor and, read back per tensor, a wait
// each. There, contiguous lists go to the multi-tensor kernels (kernels/cuda/grad_norm.cu), which give
// the same bits in a few launches for the whole list and decide the clipping on the device.
#include <cmath>

#include "core/factory.h"
#include "kernels/ops.h"
#include "kernels/optimizer_ops.h"

#if BRIGADE_HAVE_CUDA
#include "kernels/cuda/optimizer_kernels.h"
#endif

namespace brigade::ops {
namespace {

void check_list(const char* op, const std::vector<Tensor>& tensors) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string name = "tensor " + std::to_string(i);
    check_defined(op, tensors[i], name.c_str());
    check_floating(op, tensors[i]);
    BRIGADE_CHECK(tensors[i].device() == tensors[0].device(), op, ": tensors on different devices: tensor 0 is on ",
                  tensors[0].device().str(), ", tensor ", i, " on ", tensors[i].device().str());
  }
}

// Whether the multi-tensor GPU kernels take the list: on a GPU, every tensor contiguous.
bool fused(const std::vector<Tensor>& tensors) {
#if BRIGADE_HAVE_CUDA
  if (tensors.empty() || !tensors[0].device().is_cuda()) return false;
  for (const Tensor& t : tensors)
    if (!t.is_contiguous()) return false;
  return true;
#else
  (void)tensors;
  return false;
#endif
}

}  // namespace

Tensor sum_of_squares(const std::vector<Tensor>& tensors) {
  check_list("sum_of_squares", tensors);
  const Device device = tensors.empty() ? Device::cpu() : tensors[0].device();
#if BRIGADE_HAVE_CUDA
  if (fused(tensors)) {
    Tensor total = empty({}, DType::f64, device);  // written whole by the kernels: no fill first
    cuda::sum_of_squares(total, tensors);
    return total;
  }
#endif
  Tensor total = zeros({}, DType::f64, device);
  for (const Tensor& t : tensors) {
    const Tensor t64 = to_dtype(t, DType::f64);
    add_(total, sum(binary(BinaryOp::mul, t64, t64), {}, false));
  }
  return total;
}

void clip_by_norm_(const std::vector<Tensor>& tensors, const Tensor& sum_of_squares, double max_norm) {
  constexpr const char* kOp = "clip_by_norm_";
  check_list(kOp, tensors);
  check_defined(kOp, sum_of_squares, "sum_of_squares");
  BRIGADE_CHECK(sum_of_squares.numel() == 1 && sum_of_squares.dtype() == DType::f64, kOp,
                ": sum_of_squares must be one f64 value, got ", dtype_name(sum_of_squares.dtype()), " of shape ",
                shape_str(sum_of_squares.shape()));
  BRIGADE_CHECK(std::isfinite(max_norm) && max_norm > 0, kOp, ": max_norm must be a finite number > 0, got ", max_norm);
  if (tensors.empty()) return;
  check_same_device(kOp, tensors[0], sum_of_squares);
  for (const Tensor& t : tensors) check_no_self_overlap(kOp, t);
#if BRIGADE_HAVE_CUDA
  if (fused(tensors)) {
    cuda::clip_by_norm(tensors, sum_of_squares, max_norm);
    for (const Tensor& t : tensors) t.storage().bump_version();
    return;
  }
#endif
  const double norm = std::sqrt(sum_of_squares.item());
  if (!std::isfinite(norm)) return;
  // The 1e-6 keeps the clipped norm just under max_norm and avoids dividing by zero.
  const double factor = max_norm / (norm + 1e-6);
  if (factor < 1)
    for (const Tensor& t : tensors) scale_(t, factor);
}

}  // namespace brigade::ops
