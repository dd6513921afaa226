// CPU reference kernels: conv (see kernels/cpu/kernels.h for the contract).
#pragma once

#include "core/tensor.h"
#include "kernels/ops.h"

namespace brigade::cpu {

}  // namespace brigade::cpu
