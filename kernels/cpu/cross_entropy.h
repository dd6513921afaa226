// CPU reference kernels: fused log-softmax + negative log-likelihood (see kernels/cpu/kernels.h for
// the contract).
//
// logits [N, C] are contiguous f32 or f64; targets are contiguous i64 [N], each either in [0, C) or
// equal to ignore_index (the op layer checks); loss, lse [N] and grad_loss (one element) have the
// logits' dtype, so f64 logits keep an f64 log-sum-exp for an accurate backward.
#pragma once

#include "core/tensor.h"
#include "kernels/ops.h"

namespace brigade::cpu {

// Writes lse[i] = log(sum_j exp(logits[i, j])) for every row and the scalar
//   loss = scale * sum over counted rows i of (lse[i] - logits[i, targets[i]]),
// where rows whose target is ignore_index are not counted. The sum runs in row order.
void cross_entropy(const Tensor& loss, const Tensor& lse, const Tensor& logits, const Tensor& targets,
                   int64_t ignore_index, double scale);

// grad_logits[i, j] = g * scale * (exp(logits[i, j] - lse[i]) - [j == targets[i]]), and 0 on ignored
// rows, where g is the upstream gradient, grad_loss's one element (read by the kernel, so a GPU never
// has to send it to the host).
void cross_entropy_backward(const Tensor& grad_logits, const Tensor& logits, const Tensor& targets, const Tensor& lse,
                            const Tensor& grad_loss, int64_t ignore_index, double scale);

}  // namespace brigade::cpu
