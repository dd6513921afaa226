// cuBLAS plumbing: return-code checks, and the handle each thread uses on each device.
//
// A cuBLAS handle holds per-device state and is not meant to be shared between threads that call it
// at the same time, so every (thread, device) gets its own, created on first use. Each call binds the
// handle to the current stream and hands it a workspace from the caching allocator: the workspace is
// a tensor allocated on that stream, so when it is freed after the call is enqueued, whatever reuses
// the block next on the stream is ordered after the GEMM that used it.
#pragma once

#include <cublas_v2.h>

#include "core/error.h"
#include "core/tensor.h"

namespace brigade::cuda {

inline void check_cublas(cublasStatus_t status, const char* expr, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS)
    fail("cuBLAS error: ", expr, " returned ", cublasGetStatusName(status), " (", cublasGetStatusString(status),
         ") at ", file, ":", line);
}

// A handle bound to a stream, and the workspace it was given (keep it alive until the call is enqueued).
struct CublasCall {
  cublasHandle_t handle = nullptr;
  Tensor workspace;
};

// The calling thread's handle for `device` (which must be the current CUDA device), bound to `stream`.
CublasCall cublas_call(Device device, cudaStream_t stream);

}  // namespace brigade::cuda

#define BRIGADE_CUBLAS_CHECK(expr) ::brigade::cuda::check_cublas((expr), #expr, __FILE__, __LINE__)
