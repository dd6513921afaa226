// The ceilings every measurement is compared with, measured on the machine at hand rather than taken
// from a datasheet (datasheet peaks are rarely reachable; what cuBLAS and cudaMemcpy reach is).
//  - memory-bound kernels: a device-to-device cudaMemcpyAsync of a large buffer;
//  - GEMMs: cuBLAS itself, called directly (not through brigade), at the same size and dtype.
#pragma once

#if BRIGADE_HAVE_CUDA

#include <cstdint>

#include "bench/timer.h"
#include "core/dtype.h"

namespace brigade::bench {

struct Throughput {
  Summary time_ms;
  double value = 0;  // GB/s or TFLOP/s, from the median time
};

// Copy bandwidth in GB/s (1e9 bytes per second), counting each byte once read and once written.
Throughput copy_bandwidth(Device device, size_t bytes, const TimingOptions& options);

// cuBLAS C [m, n] = A [m, k] B [k, n]: bf16 in and out with f32 accumulation, or f32 — exact f32
// unless `tf32`, which lets cuBLAS round inputs to TF32 on the tensor cores. TFLOP/s = 2 m n k / time.
Throughput cublas_gemm(Device device, DType dtype, int64_t m, int64_t n, int64_t k, bool tf32,
                       const TimingOptions& options);

}  // namespace brigade::bench

#endif  // BRIGADE_HAVE_CUDA
