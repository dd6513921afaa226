// CPU reference kernels: the AdamW update (see kernels/cpu/kernels.h for the contract).
#pragma once

#include <vector>

#include "core/tensor.h"
#include "kernels/ops.h"

namespace brigade::cpu {

// One AdamW step for every parameter of the lists, in place (lists rather than one tensor, so the
// CUDA twin can update them all in one launch). Entry i: params[i] and grads[i] share a dtype (f32 or
// f64: the op layer widens half types and converts the gradient); m[i] and v[i] share theirs (f32 or
// f64). All four have the same shape and may be strided. Each update is computed in its parameter's
// dtype.
void adamw_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const std::vector<Tensor>& m,
                const std::vector<Tensor>& v, const ops::AdamWParams& p);

}  // namespace brigade::cpu
