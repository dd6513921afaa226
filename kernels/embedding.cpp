// ops: embedding lookup and its gradient. Indices are validated here, once, so the kernels can
// index without bounds checks.
#include "kernels/cpu/kernels.h"
#include "kernels/ops.h"

namespace brigade::ops {
namespace {

// Contiguous i64 indices, each checked against the table size (the first bad one is reported).
Tensor checked_indices(const char* op, const Tensor& indices, int64_t num_rows) {
  check_defined(op, indices, "indices");
  BRIGADE_CHECK(is_integral(indices.dtype()), op, ": indices must be i32 or i64, got ", dtype_name(indices.dtype()));
  check_cpu_backend(op, indices);
  Tensor idx = contiguous(to_dtype(indices, DType::i64));
  const int64_t* p = idx.data<int64_t>();
  for (int64_t i = 0; i < idx.numel(); ++i)
    BRIGADE_CHECK(p[i] >= 0 && p[i] < num_rows, op, ": index ", p[i], " is out of range for a table of ", num_rows,
                  " rows");
  return idx;
}

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  check_defined("embedding", weight, "weight");
  check_defined("embedding", indices, "indices");
  check_same_device("embedding", weight, indices);
  BRIGADE_CHECK(weight.dim() == 2, "embedding: weight must be [num_embeddings, dim], got shape ",
                shape_str(weight.shape()));
  check_cpu_backend("embedding", weight);
  const Tensor idx = checked_indices("embedding", indices, weight.size(0));
  Shape out_shape = indices.shape();
  out_shape.push_back(weight.size(1));
  Tensor out = empty(out_shape, weight.dtype(), weight.device());
  cpu::embedding(out, contiguous(weight), idx);
  return out;
}

Tensor embedding_backward(const Tensor& grad_y, const Tensor& indices, int64_t num_embeddings) {
  check_defined("embedding_backward", grad_y, "grad_y");
  check_defined("embedding_backward", indices, "indices");
  check_same_device("embedding_backward", grad_y, indices);
  check_floating("embedding_backward", grad_y);
  BRIGADE_CHECK(num_embeddings >= 0, "embedding_backward: negative num_embeddings ", num_embeddings);
  BRIGADE_CHECK(grad_y.dim() == indices.dim() + 1 &&
                    Shape(grad_y.shape().begin(), grad_y.shape().end() - 1) == indices.shape(),
                "embedding_backward: grad shape ", shape_str(grad_y.shape()), " does not match indices shape ",
                shape_str(indices.shape()), " plus an embedding dim");
  check_cpu_backend("embedding_backward", grad_y);
  const Tensor idx = checked_indices("embedding_backward", indices, num_embeddings);
  const DType t = grad_y.dtype() == DType::f64 ? DType::f64 : DType::f32;  // halves accumulate in f32
  Tensor grad_weight = empty({num_embeddings, grad_y.size(-1)}, t, grad_y.device());
  cpu::embedding_backward(grad_weight, contiguous(to_dtype(grad_y, t)), idx);
  return to_dtype(grad_weight, grad_y.dtype());
}

}  // namespace brigade::ops
