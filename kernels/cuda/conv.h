// CUDA kernels: conv — same signatures as kernels/cpu/conv (see kernels/cuda/kernels.h).
#pragma once

#include "core/tensor.h"
#include "kernels/ops.h"

namespace brigade::cuda {

}  // namespace brigade::cuda
