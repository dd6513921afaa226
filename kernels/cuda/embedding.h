// CUDA kernels: embedding — same signatures as kernels/cpu/embedding (see kernels/cuda/kernels.h).
//
// indices are contiguous i64, every value in [0, V) (the op layer has checked). The forward moves
// bytes, so any dtype works. The backward takes grad_y in f32, f64, bf16 or f16 and writes
// grad_weight in the same dtype, summing in f32 (f64 for f64) — deterministically: each row adds
// its contributions in increasing position order, exactly the CPU's order.
#pragma once

#include "core/tensor.h"
#include "kernels/ops.h"

namespace brigade::cuda {

void embedding(const Tensor& out, const Tensor& weight, const Tensor& indices);
void embedding_backward(const Tensor& grad_weight, const Tensor& grad_y, const Tensor& indices);

}  // namespace brigade::cuda
