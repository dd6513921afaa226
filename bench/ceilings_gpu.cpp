#include "bench/ceilings.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <map>
#include <mutex>

#include "core/cuda/check.h"
#include "core/rng.h"
#include "core/stream.h"
#include "kernels/cuda/cublas.h"

namespace brigade::bench {
namespace {

// One cuBLAS handle per device for the benchmark's direct calls, created on first use and kept for
// the life of the process (destroying handles at exit races with the runtime's own teardown).
cublasHandle_t handle_for(Device device) {
  static std::mutex mutex;
  static std::map<int, cublasHandle_t> handles;
  std::lock_guard<std::mutex> lock(mutex);
  cublasHandle_t& h = handles[device.index];
  if (h == nullptr) BRIGADE_CUBLAS_CHECK(cublasCreate(&h));
  return h;
}

}  // namespace

Throughput copy_bandwidth(Device device, size_t bytes, const TimingOptions& options) {
  const int64_t n = int64_t(bytes / 4);
  const Tensor src = randn({n}, DType::f32, device);  // real data: some memory systems compress zeros
  const Tensor dst = empty({n}, DType::f32, device);
  const auto stream = static_cast<cudaStream_t>(current_stream(device).raw());
  Throughput t;
  t.time_ms = time_gpu(
      device,
      [&] {
        BRIGADE_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), size_t(n) * 4, cudaMemcpyDeviceToDevice,
                                           stream));
      },
      options);
  t.value = 2.0 * double(n) * 4 / (t.time_ms.median * 1e-3) / 1e9;
  return t;
}

Throughput cublas_gemm(Device device, DType dtype, int64_t m, int64_t n, int64_t k, bool tf32,
                       const TimingOptions& options) {
  BRIGADE_CHECK(dtype == DType::bf16 || dtype == DType::f32, "cublas_gemm: bf16 or f32, got ", dtype_name(dtype));
  const Tensor a = randn({m, k}, dtype, device), b = randn({k, n}, dtype, device);
  const Tensor c = empty({m, n}, dtype, device);
  const cudaDataType type = dtype == DType::bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const cublasComputeType_t compute = tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const cublasHandle_t handle = handle_for(device);
  const float alpha = 1.0f, beta = 0.0f;
  // Row-major C = A B is column-major C^T = B^T A^T: pass B first, with the dims swapped.
  Throughput t;
  t.time_ms = time_gpu(
      device,
      [&] {
        BRIGADE_CUBLAS_CHECK(cublasSetStream(handle, static_cast<cudaStream_t>(current_stream(device).raw())));
        BRIGADE_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, int(n), int(m), int(k), &alpha,
                                          b.raw_data(), type, int(n), a.raw_data(), type, int(k), &beta, c.raw_data(),
                                          type, int(n), compute, CUBLAS_GEMM_DEFAULT));
      },
      options);
  t.value = 2.0 * double(m) * double(n) * double(k) / (t.time_ms.median * 1e-3) / 1e12;
  return t;
}

}  // namespace brigade::bench
