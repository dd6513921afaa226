// brigade::cpu — the reference kernels. Plain loops written for clarity: they are the oracle every
// CUDA kernel is checked against, and the path that runs everywhere (CI, laptops, learners).
//
// Contract: the op layer (kernels/*.cpp) has already checked shapes, dtypes and devices, allocated
// the outputs and widened bf16/f16 to f32. Kernels only compute; they never throw on valid input.
// Inputs may be strided views; outputs are whatever the op layer passes (usually contiguous).
//
// Each family's signatures are declared once, in kernels/twins/<family>.inc, for this namespace and
// brigade::cuda alike: the two backends cannot drift apart, and BRIGADE_DISPATCH (kernels/dispatch.h)
// calls either with the same words.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/tensor.h"
#include "kernels/index_scan.h"
#include "kernels/ops.h"

namespace brigade::cpu {

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

}  // namespace brigade::cpu

// The CPU's own: the GEMM building block (MatrixView, gemm) and the naive matmul the tests compare with.
#include "kernels/cpu/matmul.h"
