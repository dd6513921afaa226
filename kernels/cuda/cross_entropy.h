// CUDA kernels: cross_entropy — same signatures as kernels/cpu/cross_entropy (see kernels/cuda/kernels.h).
//
// logits [N, C] contiguous in f32, f64, bf16 or f16 (16-bit data computes in f32); targets contiguous
// i64 [N], checked by the op layer. loss and grad_loss have the logits' dtype; lse [N] is f32 (f64 for
// f64 logits). The loss sums the rows in a fixed order: deterministic.
#pragma once

#include "core/tensor.h"
#include "kernels/ops.h"

namespace brigade::cuda {

void cross_entropy(const Tensor& loss, const Tensor& lse, const Tensor& logits, const Tensor& targets,
                   int64_t ignore_index, double scale);
void cross_entropy_backward(const Tensor& grad_logits, const Tensor& logits, const Tensor& targets, const Tensor& lse,
                            const Tensor& grad_loss, int64_t ignore_index, double scale);

}  // namespace brigade::cuda
