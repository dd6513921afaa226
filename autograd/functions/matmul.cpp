// Differentiable matmul. For C = A @ B with upstream gradient dC:
//   dA = dC @ B^T      dB = A^T @ dC
// each computed only when asked for, with B^T and A^T as transposed views (the GEMM reads them
// through their strides; nothing is copied). Batch dims that were broadcast in the forward are summed
// back to each operand's shape, and 1-D operands get their unit dim back and then drop it again.
#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "autograd/tape.h"
#include "kernels/ops.h"

namespace brigade {
namespace {

// Gradient of a broadcast operand: sum over the batch dims it was broadcast along.
Tensor reduce_to(const Tensor& grad, const Shape& shape) {
  return grad.shape() == shape ? grad : ops::sum_to(grad, shape);
}

Shape batch_of(const Tensor& x) { return Shape(x.shape().begin(), x.shape().end() - 2); }

}  // namespace

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  const Tensor a = autocast(a_in), b = autocast(b_in);
  Tensor out = ops::matmul(a, b);
  record("matmul", {a, b}, {out}, [a, b](const std::vector<Tensor>& g, const std::vector<bool>& want) {
    // Redo the forward's promotion of 1-D operands, so this is plain batched algebra.
    const Tensor a2 = a.dim() == 1 ? a.unsqueeze(0) : a;  // [k] -> [1, k]
    const Tensor b2 = b.dim() == 1 ? b.unsqueeze(1) : b;  // [k] -> [k, 1]
    Shape full = broadcast_shapes(batch_of(a2), batch_of(b2), "matmul");
    full.insert(full.end(), {a2.size(-2), b2.size(-1)});
    const Tensor grad = g[0].reshape(full);  // [batch..., m, n], unit dims restored

    Tensor grad_a, grad_b;
    if (want[0]) grad_a = reduce_to(ops::matmul(grad, b2.transpose(-1, -2)), a2.shape()).reshape(a.shape());
    if (want[1]) {
      if (b2.dim() == 2 && a2.dim() > 2) {
        // A weight shared by every batch entry: fold the batch into the sum over rows, so the whole
        // gradient is one GEMM [k, batch*m] @ [batch*m, n] instead of a batch of GEMMs plus a sum.
        const Tensor a_rows = a2.reshape({-1, a2.size(-1)}), grad_rows = grad.reshape({-1, grad.size(-1)});
        grad_b = ops::matmul(a_rows.transpose(0, 1), grad_rows).reshape(b.shape());
      } else {
        grad_b = reduce_to(ops::matmul(a2.transpose(-1, -2), grad), b2.shape()).reshape(b.shape());
      }
    }
    return std::vector<Tensor>{grad_a, grad_b};
  });
  return out;
}

}  // namespace brigade
