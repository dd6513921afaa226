// Return-code checks for the CUDA runtime (CUDA translation units and CUDA-only .cpp files only).
//
// Every CUDA call in brigade goes through BRIGADE_CUDA_CHECK: a failure throws brigade::Error naming
// the call, the error and where it happened — never a silent wrong answer, never an abort. Kernel
// launches are followed by BRIGADE_CUDA_CHECK(cudaGetLastError()) to catch bad launch configurations.
#pragma once

#include <cuda_runtime.h>

#include "core/error.h"

namespace brigade::cuda {

inline void check(cudaError_t err, const char* expr, const char* file, int line) {
  if (err != cudaSuccess) {
    // A failed call also sets the thread's last-error state. It is reported here, so clear it:
    // otherwise the next BRIGADE_CUDA_CHECK_LAUNCH (which reads cudaGetLastError) would blame an
    // unrelated kernel for it after a caller has caught this error.
    cudaGetLastError();
    fail("CUDA error: ", expr, " returned ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ") at ", file,
         ":", line);
  }
}

}  // namespace brigade::cuda

#define BRIGADE_CUDA_CHECK(expr) ::brigade::cuda::check((expr), #expr, __FILE__, __LINE__)
#define BRIGADE_CUDA_CHECK_LAUNCH() ::brigade::cuda::check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
