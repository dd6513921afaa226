// CPU reference kernels: the AdamW update (see kernels/cpu/kernels.h for the contract).
#pragma once

#include "core/tensor.h"
#include "kernels/ops.h"

namespace brigade::cpu {

// One AdamW step for one parameter, in place. param and grad share a dtype (f32 or f64: the op layer
// widens half types and converts the gradient); m and v share theirs (f32 or f64). All four have the
// same shape and may be strided. The update is computed in the parameter's dtype.
void adamw_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, const ops::AdamWParams& p);

}  // namespace brigade::cpu
