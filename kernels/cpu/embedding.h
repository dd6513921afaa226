// CPU reference kernels: embedding (see kernels/cpu/kernels.h for the contract).
#pragma once

#include "core/tensor.h"
#include "kernels/ops.h"

namespace brigade::cpu {

}  // namespace brigade::cpu
