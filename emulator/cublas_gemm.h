// The CUDA emulator's cuBLAS: one GEMM call, whichever entry point it came through, as
// cublas_gemm.cpp validates and queues it and cublas_gemm_arithmetic.cpp computes it. Internal to
// the emulated cuBLAS.
#pragma once

#include <cublas_v2.h>

#include <cstddef>
#include <cstdint>

namespace brigade::emu {

struct Matrix {
  const void* data;
  cudaDataType type;
  int64_t ld;
  long long stride;  // elements between batches; signed, as the API's
};

struct Gemm {
  const char* call;  // the entry point's name, for messages
  cublasHandle_t handle;
  cublasOperation_t transa, transb;
  int64_t m, n, k, batch;
  const void* alpha;
  const void* beta;
  Matrix a, b, c;
  cublasComputeType_t compute;
  cublasGemmAlgo_t algo;
};

// How the work accumulates: f32 or f64 arithmetic, or f16 (every step rounded to half).
enum class Accumulate { f16, f32, f64 };

// What happens to each f32 input element before it is multiplied.
enum class InputRounding { none, tf32, f16, bf16 };

struct Plan {
  Accumulate accumulate;
  cudaDataType scale;  // the type alpha and beta point to
  InputRounding rounding;
};

inline size_t element_bytes(cudaDataType t) {
  switch (t) {
    case CUDA_R_16F:
    case CUDA_R_16BF: return 2;
    case CUDA_R_32F: return 4;
    default: return 8;  // CUDA_R_64F: the only other type that gets past the combination table
  }
}

inline const char* offset_bytes(const void* p, long long elements, cudaDataType t) {
  return static_cast<const char*>(p) + elements * static_cast<long long>(element_bytes(t));
}

// C = alpha op(A) op(B) + beta C for every batch, in the plan's arithmetic (cublas_gemm_arithmetic.cpp).
// The operands have been checked: every range lies in device memory.
void multiply(const Gemm& g, const Plan& plan, double alpha, double beta);

}  // namespace brigade::emu
