// CUDA kernels: adamw — same signature as kernels/cpu/adamw (see kernels/cuda/kernels.h).
//
// Parameters in f32, f64, bf16 or f16, each with a gradient of its own dtype (the op layer converts
// others — so an f32 gradient of a bf16 weight arrives rounded to bf16, where the CPU path keeps it in
// f32) and f32 or f64 state (m, v). 16-bit parameters update in f32 and are rounded once. Contiguous entries are updated by one
// multi-tensor launch per group of up to a few dozen tensors of one dtype pair; strided entries (rare:
// parameters are normally contiguous) get one elementwise launch each.
#pragma once

#include <vector>

#include "core/tensor.h"
#include "kernels/ops.h"

namespace brigade::cuda {

void adamw_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const std::vector<Tensor>& m,
                const std::vector<Tensor>& v, const ops::AdamWParams& p);

}  // namespace brigade::cuda
