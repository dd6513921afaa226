// CUDA kernels: cross_entropy — same signatures as kernels/cpu/cross_entropy (see kernels/cuda/kernels.h).
#pragma once

#include "core/tensor.h"
#include "kernels/ops.h"

namespace brigade::cuda {

}  // namespace brigade::cuda
