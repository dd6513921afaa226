// The ceilings every measurement is compared with, measured on the machine at hand rather than taken
// from a datasheet (datasheet peaks are rarely reachable; what cuBLAS, cudaMemcpy or memcpy reach is).
//  - memory-bound kernels: a copy of a buffer far larger than the caches (device-to-device
//    cudaMemcpyAsync on a GPU; memcpy split over brigade's threads on the CPU);
//  - GEMMs on a GPU: cuBLAS itself, called directly (not through brigade), at the same size and dtype;
//  - GEMMs and convolutions on the CPU: the FMA peak, a loop of independent fused multiply-adds that
//    never touches memory, on every thread brigade uses (bench/fma_peak.cpp).
#pragma once

#include "bench/gpu.h"

#include <cstddef>
#include <cstdint>
#include <string>

#include "bench/timer.h"
#include "core/dtype.h"

namespace brigade::bench {

struct Throughput {
  Summary time_ms;
  double value = 0;  // GB/s, TFLOP/s (a GPU) or GFLOP/s (the CPU), from the median time
};

// CPU copy bandwidth in GB/s (1e9 bytes per second) over a buffer of `bytes`, counting each byte once
// read and once written, the copy split evenly over brigade's threads (core/parallel.h).
Throughput cpu_copy_bandwidth(size_t bytes, const TimingOptions& options);

// The CPU's peak f32 GFLOP/s on brigade's threads: AVX2 + FMA where the CPU has them (checked at run
// time: the build has no -march flags), otherwise 16-byte vectors with a multiply and an add. Its
// value is from the fastest repeat (at least 10), not the median (see bench/fma_peak.cpp).
Throughput cpu_fma_peak(const TimingOptions& options);
// Which loop cpu_fma_peak runs on this CPU: "AVX2+FMA" or "16-byte vectors, multiply + add".
std::string cpu_fma_peak_kind();

#if BRIGADE_BENCH_GPU
// Copy bandwidth in GB/s (1e9 bytes per second), counting each byte once read and once written.
Throughput copy_bandwidth(Device device, size_t bytes, const TimingOptions& options);

// cuBLAS C [m, n] = A [m, k] B [k, n]: bf16 in and out with f32 accumulation, or f32 — exact f32
// unless `tf32`, which lets cuBLAS round inputs to TF32 on the tensor cores. TFLOP/s = 2 m n k / time.
Throughput cublas_gemm(Device device, DType dtype, int64_t m, int64_t n, int64_t k, bool tf32,
                       const TimingOptions& options);
#endif

}  // namespace brigade::bench
