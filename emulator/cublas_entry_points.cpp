// The CUDA emulator's cuBLAS, part 3: the public GEMM entry points.
//
// cublasGemmEx, cublasGemmStridedBatchedEx, cublasSgemm, cublasDgemm, cublasSgemmStridedBatched and
// cublasDgemmStridedBatched, each also in its _64 form (64-bit sizes, cuBLAS docs 2.1.x "64-bit
// Integer Interface"). Each only names its arguments: the typed forms are cublasGemmEx with fixed
// types, and all of them go to brigade::emu::cublas_gemm (cublas_gemm.cpp), which validates, queues
// and computes. The signatures are the real header's (cublas_v2.h maps cublasSgemm to
// cublasSgemm_v2, and so on).
#include <cublas_v2.h>

#include <cstdint>

namespace brigade::emu {

// cublas_gemm.cpp: every GEMM, flattened (strides in elements; batch 1 for the unbatched forms).
cublasStatus_t cublas_gemm(const char* call, cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                           int64_t m, int64_t n, int64_t k, const void* alpha, const void* A, cudaDataType Atype,
                           int64_t lda, long long strideA, const void* B, cudaDataType Btype, int64_t ldb,
                           long long strideB, const void* beta, void* C, cudaDataType Ctype, int64_t ldc,
                           long long strideC, int64_t batch, cublasComputeType_t compute, cublasGemmAlgo_t algo);

}  // namespace brigade::emu

namespace {

// The compute type of the typed GEMMs: cuBLAS docs, 2.7.1 cublas<t>gemm() and 2.2.11 cublasMath_t.
// Sgemm and Dgemm follow the math mode: PEDANTIC_MATH means the _PEDANTIC compute type; otherwise
// COMPUTE_32F / COMPUTE_64F, on which TF32_TENSOR_OP_MATH then acts as it does in cublasGemmEx.
cublasComputeType_t typed_compute(cublasHandle_t handle, bool f64) {
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
  if (cublasGetMathMode(handle, &math) != CUBLAS_STATUS_SUCCESS) math = CUBLAS_DEFAULT_MATH;  // rejected later
  const bool pedantic = (int(math) & ~int(CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)) == CUBLAS_PEDANTIC_MATH;
  if (f64) return pedantic ? CUBLAS_COMPUTE_64F_PEDANTIC : CUBLAS_COMPUTE_64F;
  return pedantic ? CUBLAS_COMPUTE_32F_PEDANTIC : CUBLAS_COMPUTE_32F;
}

cublasStatus_t typed_gemm(const char* call, cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                          int64_t m, int64_t n, int64_t k, const void* alpha, const void* A, int64_t lda,
                          long long strideA, const void* B, int64_t ldb, long long strideB, const void* beta, void* C,
                          int64_t ldc, long long strideC, int64_t batch, bool f64) {
  const cudaDataType t = f64 ? CUDA_R_64F : CUDA_R_32F;
  return brigade::emu::cublas_gemm(call, handle, transa, transb, m, n, k, alpha, A, t, lda, strideA, B, t, ldb,
                                   strideB, beta, C, t, ldc, strideC, batch, typed_compute(handle, f64),
                                   CUBLAS_GEMM_DEFAULT);
}

}  // namespace

// ---- cublasGemmEx and cublasGemmStridedBatchedEx ---------------------------------------------------

// cuBLAS docs, 2.8.12 cublasGemmEx(): C = alpha op(A) op(B) + beta C with the types and compute type
// of the supported-combinations table; one matrix each (batchCount 1).
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  return cublasGemmEx_64(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc,
                         computeType, algo);
}

// cuBLAS docs, 2.8.12 cublasGemmEx(), 64-bit sizes ("cuBLAS API: 64-bit Integer Interface").
cublasStatus_t cublasGemmEx_64(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int64_t m,
                               int64_t n, int64_t k, const void* alpha, const void* A, cudaDataType Atype, int64_t lda,
                               const void* B, cudaDataType Btype, int64_t ldb, const void* beta, void* C,
                               cudaDataType Ctype, int64_t ldc, cublasComputeType_t computeType,
                               cublasGemmAlgo_t algo) {
  return brigade::emu::cublas_gemm("cublasGemmEx", handle, transa, transb, m, n, k, alpha, A, Atype, lda, 0, B, Btype,
                                   ldb, 0, beta, C, Ctype, ldc, 0, 1, computeType, algo);
}

// cuBLAS docs, 2.8.14 cublasGemmStridedBatchedEx(): batchCount GEMMs of cublasGemmEx's kind, batch i
// at A + i * strideA, B + i * strideB, C + i * strideC (in elements; strides are signed). batchCount
// < 0 is INVALID_VALUE, 0 does nothing.
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                          int m, int n, int k, const void* alpha, const void* A, cudaDataType Atype,
                                          int lda, long long int strideA, const void* B, cudaDataType Btype, int ldb,
                                          long long int strideB, const void* beta, void* C, cudaDataType Ctype,
                                          int ldc, long long int strideC, int batchCount,
                                          cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  return cublasGemmStridedBatchedEx_64(handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype, ldb,
                                       strideB, beta, C, Ctype, ldc, strideC, batchCount, computeType, algo);
}

cublasStatus_t cublasGemmStridedBatchedEx_64(cublasHandle_t handle, cublasOperation_t transa,
                                             cublasOperation_t transb, int64_t m, int64_t n, int64_t k,
                                             const void* alpha, const void* A, cudaDataType Atype, int64_t lda,
                                             long long int strideA, const void* B, cudaDataType Btype, int64_t ldb,
                                             long long int strideB, const void* beta, void* C, cudaDataType Ctype,
                                             int64_t ldc, long long int strideC, int64_t batchCount,
                                             cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  return brigade::emu::cublas_gemm("cublasGemmStridedBatchedEx", handle, transa, transb, m, n, k, alpha, A, Atype, lda,
                                   strideA, B, Btype, ldb, strideB, beta, C, Ctype, ldc, strideC, batchCount,
                                   computeType, algo);
}

// ---- cublasSgemm, cublasDgemm and their strided batched forms --------------------------------------

// cuBLAS docs, 2.7.1 cublas<t>gemm(), S and D.
cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                              int k, const float* alpha, const float* A, int lda, const float* B, int ldb,
                              const float* beta, float* C, int ldc) {
  return cublasSgemm_v2_64(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}
cublasStatus_t cublasSgemm_v2_64(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int64_t m,
                                 int64_t n, int64_t k, const float* alpha, const float* A, int64_t lda, const float* B,
                                 int64_t ldb, const float* beta, float* C, int64_t ldc) {
  return typed_gemm("cublasSgemm", handle, transa, transb, m, n, k, alpha, A, lda, 0, B, ldb, 0,
                        beta, C, ldc, 0, 1, false);
}
cublasStatus_t cublasDgemm_v2(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                              int k, const double* alpha, const double* A, int lda, const double* B, int ldb,
                              const double* beta, double* C, int ldc) {
  return cublasDgemm_v2_64(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}
cublasStatus_t cublasDgemm_v2_64(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int64_t m,
                                 int64_t n, int64_t k, const double* alpha, const double* A, int64_t lda,
                                 const double* B, int64_t ldb, const double* beta, double* C, int64_t ldc) {
  return typed_gemm("cublasDgemm", handle, transa, transb, m, n, k, alpha, A, lda, 0, B, ldb, 0,
                        beta, C, ldc, 0, 1, true);
}

// cuBLAS docs, 2.7.4 cublas<t>gemmStridedBatched(), S and D.
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                         int m, int n, int k, const float* alpha, const float* A, int lda,
                                         long long int strideA, const float* B, int ldb, long long int strideB,
                                         const float* beta, float* C, int ldc, long long int strideC,
                                         int batchCount) {
  return cublasSgemmStridedBatched_64(handle, transa, transb, m, n, k, alpha, A, lda, strideA, B, ldb, strideB, beta,
                                      C, ldc, strideC, batchCount);
}
cublasStatus_t cublasSgemmStridedBatched_64(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                            int64_t m, int64_t n, int64_t k, const float* alpha, const float* A,
                                            int64_t lda, long long int strideA, const float* B, int64_t ldb,
                                            long long int strideB, const float* beta, float* C, int64_t ldc,
                                            long long int strideC, int64_t batchCount) {
  return typed_gemm("cublasSgemmStridedBatched", handle, transa, transb, m, n, k, alpha, A, lda,
                        strideA, B, ldb, strideB, beta, C, ldc, strideC, batchCount, false);
}
cublasStatus_t cublasDgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                         int m, int n, int k, const double* alpha, const double* A, int lda,
                                         long long int strideA, const double* B, int ldb, long long int strideB,
                                         const double* beta, double* C, int ldc, long long int strideC,
                                         int batchCount) {
  return cublasDgemmStridedBatched_64(handle, transa, transb, m, n, k, alpha, A, lda, strideA, B, ldb, strideB, beta,
                                      C, ldc, strideC, batchCount);
}
cublasStatus_t cublasDgemmStridedBatched_64(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                            int64_t m, int64_t n, int64_t k, const double* alpha, const double* A,
                                            int64_t lda, long long int strideA, const double* B, int64_t ldb,
                                            long long int strideB, const double* beta, double* C, int64_t ldc,
                                            long long int strideC, int64_t batchCount) {
  return typed_gemm("cublasDgemmStridedBatched", handle, transa, transb, m, n, k, alpha, A, lda,
                        strideA, B, ldb, strideB, beta, C, ldc, strideC, batchCount, true);
}
