// ops: cross entropy (fused log-softmax + NLL) and its backward. Targets are validated and counted
// here, once; the kernels see contiguous logits and contiguous i64 targets. The CPU reference takes
// f32/f64 logits (bf16/f16 are widened to f32 and the gradient narrowed back); CUDA kernels take
// 16-bit logits directly and compute in f32. The loss (and its incoming gradient) is f32 for 16-bit
// logits either way, so a bf16 model needs no f32 copy of its logits — the largest tensor of a
// language model's step — to get an f32 loss: the same bits as widening the logits first.
#include "kernels/checked_indices.h"
#include "kernels/dispatch.h"
#include "kernels/ops.h"

namespace brigade::ops {
namespace {

// The dtype of the saved log-sum-exp: f64 for f64 logits (an accurate f64 backward), else f32.
DType lse_dtype(DType t) { return t == DType::f64 ? DType::f64 : DType::f32; }
// The dtype the kernels take logits in.
DType kernel_dtype(const Tensor& logits) {
  return logits.device().is_cpu() ? lse_dtype(logits.dtype()) : logits.dtype();
}

void check_inputs(const char* op, const Tensor& logits, const Tensor& targets) {
  check_defined(op, logits, "logits");
  check_defined(op, targets, "targets");
  check_same_device(op, logits, targets);
  check_floating(op, logits);
  BRIGADE_CHECK(logits.dim() == 2, op, ": logits must be [N, C], got shape ", shape_str(logits.shape()));
  BRIGADE_CHECK(is_integral(targets.dtype()), op, ": targets must be i32 or i64, got ", dtype_name(targets.dtype()));
  BRIGADE_CHECK(targets.shape() == Shape{logits.size(0)}, op, ": targets shape ", shape_str(targets.shape()),
                " does not match logits shape ", shape_str(logits.shape()), " (expected [", logits.size(0), "])");
}

// Targets checked to be class indices or ignore_index, and counted (those that take part), unless
// `earlier` covers them. On a GPU the check is a kernel whose summary the host waits for.
CheckedIndices checked_targets(const char* op, const Tensor& targets, int64_t classes, int64_t ignore_index,
                               const CheckedIndices* earlier) {
  IndexScan bad;
  CheckedIndices checked = check_indices(op, targets, classes, ignore_index, earlier, bad);
  BRIGADE_CHECK(bad.bad_position < 0, op, ": target ", bad.bad_value, " at position ", bad.bad_position,
                " is out of range for ", classes, " classes (and is not ignore_index ", ignore_index, ")");
  return checked;
}

// The factor every row's loss (and gradient) is multiplied by: 1 for a sum, 1 / count for a mean
// (and 0 when nothing was counted: the mean of no terms is defined as 0, not NaN). A count known only
// on the device (a CUDA graph capture) is read there.
LossScale reduction_scale(Reduction reduction, const CheckedIndices& targets) {
  if (reduction == Reduction::sum) return {};
  if (targets.counted < 0) return {0.0, targets.counted_on_device.data<int64_t>()};
  return {targets.counted > 0 ? 1.0 / double(targets.counted) : 0.0};
}

}  // namespace

CrossEntropyOutput cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                                 Reduction reduction) {
  check_inputs("cross_entropy", logits, targets);
  CrossEntropyOutput out;
  out.targets = checked_targets("cross_entropy", targets, logits.size(1), ignore_index, nullptr);
  out.count = out.targets.counted;
  const Tensor t = out.targets.indices;
  const DType compute = kernel_dtype(logits);
  const Tensor x = contiguous(to_dtype(logits, compute));
  out.loss = empty({}, lse_dtype(logits.dtype()), logits.device());
  out.lse = empty({logits.size(0)}, lse_dtype(logits.dtype()), logits.device());
  BRIGADE_DISPATCH("cross_entropy", logits,
                   cross_entropy(out.loss, out.lse, x, t, ignore_index, reduction_scale(reduction, out.targets)));
  return out;
}

Tensor cross_entropy_backward(const Tensor& grad_loss, const Tensor& logits, const Tensor& targets,
                              const CrossEntropyOutput& saved, int64_t ignore_index, Reduction reduction) {
  check_inputs("cross_entropy_backward", logits, targets);
  check_defined("cross_entropy_backward", grad_loss, "grad_loss");
  check_same_device("cross_entropy_backward", grad_loss, logits);
  BRIGADE_CHECK(grad_loss.numel() == 1, "cross_entropy_backward: grad_loss must hold one value, got shape ",
                shape_str(grad_loss.shape()));
  check_floating("cross_entropy_backward", grad_loss);
  const DType stats = lse_dtype(logits.dtype());
  BRIGADE_CHECK(saved.lse.defined() && saved.lse.dtype() == stats && saved.lse.shape() == Shape{logits.size(0)} &&
                    saved.lse.device() == logits.device(),
                "cross_entropy_backward: saved lse does not match logits shape ", shape_str(logits.shape()),
                " (expected ", dtype_name(stats), " [", logits.size(0), "] on ", logits.device().str(), ")");
  const CheckedIndices checked =
      checked_targets("cross_entropy_backward", targets, logits.size(1), ignore_index, &saved.targets);
  const Tensor& t = checked.indices;
  const DType compute = kernel_dtype(logits);
  const Tensor x = contiguous(to_dtype(logits, compute));
  const Tensor g = contiguous(to_dtype(grad_loss, stats));  // read by the kernel: no trip to the host
  const Tensor lse = contiguous(saved.lse);
  Tensor grad = empty(logits.shape(), compute, logits.device());
  BRIGADE_DISPATCH("cross_entropy_backward", logits,
                   cross_entropy_backward(grad, x, t, lse, g, ignore_index, reduction_scale(reduction, checked)));
  return to_dtype(grad, logits.dtype());
}

}  // namespace brigade::ops
