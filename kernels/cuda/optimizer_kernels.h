// brigade::cuda — the GPU's own kernels behind kernels/optimizer_ops.h (no CPU twins: the CPU composes
// the clipping from other ops, and has no graphs to stage AdamW's coefficients for). Like every CUDA
// kernel here, each launches on the current stream of its tensors' device and never synchronises.
#pragma once

#include <cstddef>
#include <vector>

#include "core/tensor.h"
#include "kernels/params.h"

namespace brigade::cuda {

// ops::sum_of_squares and ops::clip_by_norm_ over contiguous tensors (kernels/cuda/grad_norm.cu).
void sum_of_squares(const Tensor& out, const std::vector<Tensor>& tensors);
void clip_by_norm(const std::vector<Tensor>& tensors, const Tensor& sum_of_squares, double max_norm);

// AdamW with its step's coefficients staged in device memory (kernels/cuda/adamw.cu).
size_t adamw_staged_bytes();
void adamw_stage(const Tensor& staged, const ops::AdamWParams& p);
void adamw_step_staged(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                       const std::vector<Tensor>& m, const std::vector<Tensor>& v, const Tensor& staged);

}  // namespace brigade::cuda
