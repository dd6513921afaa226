// ops: embedding lookup and its gradient. Indices are validated here, once, so the kernels can
// index without bounds checks.
#include "kernels/checked_indices.h"
#include "kernels/dispatch.h"
#include "kernels/ops.h"

namespace brigade::ops {
namespace {

// Indices checked against the table size (the first bad one is reported), unless `earlier` covers
// them. On a GPU the check is a kernel whose two-number summary the host waits for: an error must be
// thrown before a kernel reads out of bounds.
CheckedIndices checked_indices(const char* op, const Tensor& indices, int64_t num_rows, const CheckedIndices* earlier) {
  check_defined(op, indices, "indices");
  BRIGADE_CHECK(is_integral(indices.dtype()), op, ": indices must be i32 or i64, got ", dtype_name(indices.dtype()));
  IndexScan bad;
  CheckedIndices checked = check_indices(op, indices, num_rows, std::nullopt, earlier, bad);
  BRIGADE_CHECK(bad.bad_position < 0, op, ": index ", bad.bad_value, " is out of range for a table of ", num_rows,
                " rows");
  return checked;
}

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& indices, CheckedIndices* checked) {
  check_defined("embedding", weight, "weight");
  check_defined("embedding", indices, "indices");
  check_same_device("embedding", weight, indices);
  BRIGADE_CHECK(weight.dim() == 2, "embedding: weight must be [num_embeddings, dim], got shape ",
                shape_str(weight.shape()));
  CheckedIndices scanned = checked_indices("embedding", indices, weight.size(0), nullptr);
  const Tensor idx = scanned.indices;
  if (checked != nullptr) *checked = std::move(scanned);
  Shape out_shape = indices.shape();
  out_shape.push_back(weight.size(1));
  Tensor out = empty(out_shape, weight.dtype(), weight.device());
  const Tensor table = contiguous(weight);
  BRIGADE_DISPATCH("embedding", weight, embedding(out, table, idx));
  return out;
}

Tensor embedding_backward(const Tensor& grad_y, const Tensor& indices, int64_t num_embeddings,
                          const CheckedIndices* checked) {
  check_defined("embedding_backward", grad_y, "grad_y");
  check_defined("embedding_backward", indices, "indices");
  check_same_device("embedding_backward", grad_y, indices);
  check_floating("embedding_backward", grad_y);
  BRIGADE_CHECK(num_embeddings >= 0, "embedding_backward: negative num_embeddings ", num_embeddings);
  BRIGADE_CHECK(grad_y.dim() == indices.dim() + 1 &&
                    Shape(grad_y.shape().begin(), grad_y.shape().end() - 1) == indices.shape(),
                "embedding_backward: grad shape ", shape_str(grad_y.shape()), " does not match indices shape ",
                shape_str(indices.shape()), " plus an embedding dim");
  const Tensor idx = checked_indices("embedding_backward", indices, num_embeddings, checked).indices;
  // Sums run in f32 for 16-bit gradients: the CPU on an f32 copy, CUDA in registers.
  const bool widen = grad_y.device().is_cpu() && is_half(grad_y.dtype());
  const DType t = widen ? DType::f32 : grad_y.dtype();
  Tensor grad_weight = empty({num_embeddings, grad_y.size(-1)}, t, grad_y.device());
  const Tensor g = contiguous(to_dtype(grad_y, t));
  BRIGADE_DISPATCH("embedding_backward", grad_y, embedding_backward(grad_weight, g, idx));
  return to_dtype(grad_weight, grad_y.dtype());
}

}  // namespace brigade::ops
