// brigade::cuda — the hand-written CUDA kernels, with exactly the signatures of their CPU reference
// twins: both are declared from the same lists, kernels/twins/<family>.inc (so BRIGADE_DISPATCH can
// call either). Each launches on the current stream of its tensors' device (core/cuda/current.h) and
// never synchronises. What a family does differently on the GPU is said at the top of its .cu file.
//
// Contract, as for the CPU kernels: the op layer has checked shapes, dtypes and devices and allocated
// outputs. Unlike the CPU reference, CUDA kernels take bf16/f16 directly (accumulating in f32).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/tensor.h"
#include "kernels/index_scan.h"
#include "kernels/ops.h"

namespace brigade::cuda {

#include "kernels/twins/copy.inc"
#include "kernels/twins/elementwise.inc"
#include "kernels/twins/reduce.inc"
#include "kernels/twins/softmax.inc"
#include "kernels/twins/norm.inc"
#include "kernels/twins/embedding.inc"
#include "kernels/twins/cross_entropy.inc"
#include "kernels/twins/dropout.inc"
#include "kernels/twins/adamw.inc"
#include "kernels/twins/matmul.inc"
#include "kernels/twins/conv.inc"
#include "kernels/twins/pool.inc"
#include "kernels/twins/indices.inc"
#include "kernels/twins/attention.inc"
#include "kernels/twins/rope.inc"
#include "kernels/twins/swiglu.inc"

// The GPU's own: matmul with an explicit GEMM (automatic = cuBLAS); the op layer has checked that
// the backend takes the dtype (ops::matmul's list).
void matmul(const Tensor& out, const Tensor& a, const Tensor& b, ops::MatmulBackend backend);
void linear_epilogue(const Tensor& out, const Tensor& pre, const Tensor& a, const Tensor& b, const Tensor& bias,
                     Activation act, ops::MatmulBackend backend);

}  // namespace brigade::cuda
