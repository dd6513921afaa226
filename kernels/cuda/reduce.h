// CUDA kernels: reduce — same signatures as kernels/cpu/reduce (see kernels/cuda/kernels.h).
#pragma once

#include "core/tensor.h"
#include "kernels/ops.h"

namespace brigade::cuda {

}  // namespace brigade::cuda
