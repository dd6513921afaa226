// BRIGADE_DISPATCH: the one place an op chooses its backend.
//
//   BRIGADE_DISPATCH("add", a, binary(op, out, a, b));
//
// runs cuda::binary(op, out, a, b) when `a` lives on a GPU (in a build with CUDA) and
// cpu::binary(op, out, a, b) otherwise — the same call, spelled once, against two namespaces whose
// kernels have the same signatures (kernels/twins/*.inc declares them once for both). The op layer
// has already checked that all operands share a device.
//
// Every op chooses here but two: matmul and linear (kernels/matmul.cpp), whose CUDA kernels take the
// GEMM backend (MatmulBackend) that the CPU's single GEMM has no use for. They spell the same choice
// out, with the same check_cpu_backend on the CPU side.
#pragma once

#include "kernels/cpu/kernels.h"
#include "kernels/ops.h"

#if BRIGADE_HAVE_CUDA
#include "kernels/cuda/kernels.h"
#define BRIGADE_DISPATCH(op_name, tensor, call)   \
  do {                                            \
    if ((tensor).device().is_cuda()) {            \
      ::brigade::cuda::call;                      \
    } else {                                      \
      ::brigade::ops::check_cpu_backend(op_name, tensor); \
      ::brigade::cpu::call;                       \
    }                                             \
  } while (0)
#else
#define BRIGADE_DISPATCH(op_name, tensor, call)          \
  do {                                                   \
    ::brigade::ops::check_cpu_backend(op_name, tensor);  \
    ::brigade::cpu::call;                                \
  } while (0)
#endif
