// ops: cross entropy (fused log-softmax + NLL) and its backward. Targets are validated and counted
// here, once; the kernels see contiguous logits in f32/f64 and contiguous i64 targets.
#include "kernels/cpu/kernels.h"
#include "kernels/ops.h"

namespace brigade::ops {
namespace {

DType compute_dtype(DType t) { return t == DType::f64 ? DType::f64 : DType::f32; }

void check_inputs(const char* op, const Tensor& logits, const Tensor& targets) {
  check_defined(op, logits, "logits");
  check_defined(op, targets, "targets");
  check_same_device(op, logits, targets);
  check_floating(op, logits);
  BRIGADE_CHECK(logits.dim() == 2, op, ": logits must be [N, C], got shape ", shape_str(logits.shape()));
  BRIGADE_CHECK(is_integral(targets.dtype()), op, ": targets must be i32 or i64, got ", dtype_name(targets.dtype()));
  BRIGADE_CHECK(targets.shape() == Shape{logits.size(0)}, op, ": targets shape ", shape_str(targets.shape()),
                " does not match logits shape ", shape_str(logits.shape()), " (expected [", logits.size(0), "])");
  check_cpu_backend(op, logits);
}

// Contiguous i64 targets, each checked to be a class index or ignore_index; also counts the
// targets that take part.
Tensor checked_targets(const char* op, const Tensor& targets, int64_t classes, int64_t ignore_index, int64_t& count) {
  Tensor t = contiguous(to_dtype(targets, DType::i64));
  const int64_t* p = t.data<int64_t>();
  count = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (p[i] == ignore_index) continue;
    BRIGADE_CHECK(p[i] >= 0 && p[i] < classes, op, ": target ", p[i], " at position ", i, " is out of range for ",
                  classes, " classes (and is not ignore_index ", ignore_index, ")");
    ++count;
  }
  return t;
}

// The factor every row's loss (and gradient) is multiplied by: 1 for a sum, 1 / count for a mean
// (and 0 when nothing was counted: the mean of no terms is defined as 0, not NaN).
double reduction_scale(Reduction reduction, int64_t count) {
  if (reduction == Reduction::sum) return 1.0;
  return count > 0 ? 1.0 / double(count) : 0.0;
}

}  // namespace

CrossEntropyOutput cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                                 Reduction reduction) {
  check_inputs("cross_entropy", logits, targets);
  CrossEntropyOutput out;
  const Tensor t = checked_targets("cross_entropy", targets, logits.size(1), ignore_index, out.count);
  const DType compute = compute_dtype(logits.dtype());
  out.loss = empty({}, compute, logits.device());
  out.lse = empty({logits.size(0)}, DType::f32, logits.device());
  cpu::cross_entropy(out.loss, out.lse, contiguous(to_dtype(logits, compute)), t, ignore_index,
                     reduction_scale(reduction, out.count));
  out.loss = to_dtype(out.loss, logits.dtype());
  return out;
}

Tensor cross_entropy_backward(const Tensor& grad_loss, const Tensor& logits, const Tensor& targets,
                              const CrossEntropyOutput& saved, int64_t ignore_index, Reduction reduction) {
  check_inputs("cross_entropy_backward", logits, targets);
  check_defined("cross_entropy_backward", grad_loss, "grad_loss");
  check_same_device("cross_entropy_backward", grad_loss, logits);
  BRIGADE_CHECK(grad_loss.numel() == 1, "cross_entropy_backward: grad_loss must hold one value, got shape ",
                shape_str(grad_loss.shape()));
  BRIGADE_CHECK(saved.lse.defined() && saved.lse.dtype() == DType::f32 && saved.lse.shape() == Shape{logits.size(0)},
                "cross_entropy_backward: saved lse does not match logits shape ", shape_str(logits.shape()));
  int64_t count = 0;
  const Tensor t = checked_targets("cross_entropy_backward", targets, logits.size(1), ignore_index, count);
  const DType compute = compute_dtype(logits.dtype());
  Tensor grad = empty(logits.shape(), compute, logits.device());
  cpu::cross_entropy_backward(grad, contiguous(to_dtype(logits, compute)), t, contiguous(saved.lse), ignore_index,
                              grad_loss.item() * reduction_scale(reduction, count));
  return to_dtype(grad, logits.dtype());
}

}  // namespace brigade::ops
