// CUDA kernels: matmul — same signatures as kernels/cpu/matmul (see kernels/cuda/kernels.h).
#pragma once

#include "core/tensor.h"
#include "kernels/ops.h"

namespace brigade::cuda {

// out [batch..., m, n] = a [batch..., m, k] @ b [batch..., k, n], as cpu::matmul: a and b already
// carry out's batch dims (stride 0 where broadcast) and may have any strides; out is contiguous.
// Takes f32, f64, bf16 and f16 operands directly; out has their dtype (or f32 for 16-bit operands).
// Runs the GEMM ops::matmul_backend() names.
void matmul(const Tensor& out, const Tensor& a, const Tensor& b);
// The same with an explicit choice (automatic = cuBLAS); the op layer has checked that the backend
// takes the dtype (ops::matmul's list).
void matmul(const Tensor& out, const Tensor& a, const Tensor& b, ops::MatmulBackend backend);

}  // namespace brigade::cuda
