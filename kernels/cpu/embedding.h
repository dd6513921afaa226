// CPU reference kernels: embedding lookup and its gradient (see kernels/cpu/kernels.h for the contract).
//
// indices are contiguous i64 with every value in [0, V) (the op layer checks and converts).
#pragma once

#include "core/tensor.h"
#include "kernels/ops.h"

namespace brigade::cpu {

// out[i, :] = weight[indices[i], :] for the i-th index in row-major order. weight [V, D] and
// out [..., D] are contiguous, of any (same) dtype: a lookup only moves bytes.
void embedding(const Tensor& out, const Tensor& weight, const Tensor& indices);

// grad_weight[v, :] = sum of grad_y[i, :] over the i with indices[i] == v, summed in increasing i.
// grad_weight [V, D] and grad_y [..., D] (indices' shape plus D) are contiguous f32 or f64.
void embedding_backward(const Tensor& grad_weight, const Tensor& grad_y, const Tensor& indices);

}  // namespace brigade::cpu
