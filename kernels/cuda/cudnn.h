// cuDNN plumbing (builds with cuDNN only): return-code checks, and the handle each thread uses on
// each device — like cuBLAS's (kernels/cuda/cublas.h), a handle is per (thread, device) and is bound
// to the current stream before every call.
#pragma once

#include <cudnn.h>

#include "core/device.h"
#include "core/error.h"

namespace brigade::cuda {

inline void check_cudnn(cudnnStatus_t status, const char* expr, const char* file, int line) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  char detail[512] = "";
  cudnnGetLastErrorString(detail, sizeof detail);  // cuDNN 9's account of what went wrong, if any
  fail("cuDNN error: ", expr, " returned ", cudnnGetErrorString(status), " at ", file, ":", line,
       detail[0] ? ": " : "", detail);
}

// The calling thread's cuDNN handle for `device` (the current CUDA device), bound to `stream`.
cudnnHandle_t cudnn_handle(Device device, cudaStream_t stream);

}  // namespace brigade::cuda

#define BRIGADE_CUDNN_CHECK(expr) ::brigade::cuda::check_cudnn((expr), #expr, __FILE__, __LINE__)
