// The CUDA emulator's cuBLAS, part 2: the GEMMs, C = alpha op(A) op(B) + beta C.
//
// Every GEMM entry point (cublasGemmEx, cublasGemmStridedBatchedEx, cublasSgemm, cublasDgemm and
// their strided batched and _64 forms, in cublas_entry_points.cpp) calls cublas_gemm below, which
// goes through the same two steps as the real library:
//
//   1. validate on the host and return the status at once: a null or dead handle is NOT_INITIALIZED;
//      negative sizes, a bad op, a leading dimension below its documented minimum or a null alpha or
//      beta is INVALID_VALUE; a type combination outside cublasGemmEx's table is NOT_SUPPORTED. The
//      emulator also prints why to stderr (the real library prints "** On entry to ..." lines);
//   2. queue the arithmetic on the handle's stream (brigade::emu::enqueue). It runs after the work
//      issued before it; host-mode alpha and beta are copied at the call, device-mode ones are read
//      when the work runs. Inside the work every operand range must lie in device memory of the
//      handle's device; one that does not is the illegal-address fault a GPU would take, reported by
//      the next synchronising call.
//
// The arithmetic, in the compute type's precision and summing in order, is in
// cublas_gemm_arithmetic.cpp.
//
// What it does not model: the complex, int8 and batched-pointer-array GEMMs (NOT_SUPPORTED or absent),
// split-K and other orders of summation (so no run-to-run differences), the workspace (never touched),
// and the speed.
#include <cublas_v2.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "emulator/cublas_gemm.h"
#include "emulator/runtime.h"

namespace brigade::emu {

// cublas.cpp: the handle's device, stream and modes; NOT_INITIALIZED for a handle that is not live.
cublasStatus_t cublas_handle_state(cublasHandle_t handle, int* device, cudaStream_t* stream,
                                   cublasPointerMode_t* pointer_mode, cublasMath_t* math_mode);

namespace {

// ---- naming a GEMM call (the Gemm of cublas_gemm.h) in messages --------------------------------------

const char* type_name(cudaDataType t) {
  switch (t) {
    case CUDA_R_16F: return "16F";
    case CUDA_R_16BF: return "16BF";
    case CUDA_R_32F: return "32F";
    case CUDA_R_64F: return "64F";
    case CUDA_R_8I: return "8I";
    case CUDA_R_32I: return "32I";
    case CUDA_C_32F: return "C_32F";
    case CUDA_C_64F: return "C_64F";
    default: return "an unknown cudaDataType";
  }
}

const char* op_name(cublasOperation_t op) {
  switch (op) {
    case CUBLAS_OP_N: return "N";
    case CUBLAS_OP_T: return "T";
    case CUBLAS_OP_C: return "C";
    default: return "?";
  }
}

const char* compute_name(cublasComputeType_t c) {
  switch (c) {
    case CUBLAS_COMPUTE_16F: return "CUBLAS_COMPUTE_16F";
    case CUBLAS_COMPUTE_16F_PEDANTIC: return "CUBLAS_COMPUTE_16F_PEDANTIC";
    case CUBLAS_COMPUTE_32F: return "CUBLAS_COMPUTE_32F";
    case CUBLAS_COMPUTE_32F_PEDANTIC: return "CUBLAS_COMPUTE_32F_PEDANTIC";
    case CUBLAS_COMPUTE_32F_FAST_16F: return "CUBLAS_COMPUTE_32F_FAST_16F";
    case CUBLAS_COMPUTE_32F_FAST_16BF: return "CUBLAS_COMPUTE_32F_FAST_16BF";
    case CUBLAS_COMPUTE_32F_FAST_TF32: return "CUBLAS_COMPUTE_32F_FAST_TF32";
    case CUBLAS_COMPUTE_32F_EMULATED_16BFX9: return "CUBLAS_COMPUTE_32F_EMULATED_16BFX9";
    case CUBLAS_COMPUTE_64F: return "CUBLAS_COMPUTE_64F";
    case CUBLAS_COMPUTE_64F_PEDANTIC: return "CUBLAS_COMPUTE_64F_PEDANTIC";
    case CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT: return "CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT";
    case CUBLAS_COMPUTE_32I: return "CUBLAS_COMPUTE_32I";
    case CUBLAS_COMPUTE_32I_PEDANTIC: return "CUBLAS_COMPUTE_32I_PEDANTIC";
  }
  return "an unknown cublasComputeType_t";
}

// "cublasGemmEx(T, N, m=4, n=3, k=2, A 32F lda=5, B 32F ldb=2, C 32F ldc=4, CUBLAS_COMPUTE_32F)":
// names the work in stream, race and error reports.
std::string describe(const Gemm& g) {
  std::string s = std::string(g.call) + "(" + op_name(g.transa) + ", " + op_name(g.transb) +
                  ", m=" + std::to_string(g.m) + ", n=" + std::to_string(g.n) + ", k=" + std::to_string(g.k);
  auto matrix = [&](const char* name, const Matrix& x, const char* ld) {
    s += std::string(", ") + name + " " + type_name(x.type) + " " + ld + "=" + std::to_string(x.ld);
    if (g.batch != 1 || x.stride != 0) s += " stride=" + std::to_string(x.stride);
  };
  matrix("A", g.a, "lda");
  matrix("B", g.b, "ldb");
  matrix("C", g.c, "ldc");
  if (g.batch != 1) s += ", batchCount=" + std::to_string(g.batch);
  return s + ", " + compute_name(g.compute) + ")";
}

cublasStatus_t reject(cublasStatus_t status, const Gemm& g, const std::string& why) {
  std::fprintf(stderr, "brigade CUDA emulator: %s returns %s: %s\n", describe(g).c_str(), cublasGetStatusName(status),
               why.c_str());
  return status;
}

// ---- the combinations cuBLAS supports --------------------------------------------------------------

// cuBLAS docs, 2.8.12 cublasGemmEx(), the table of supported (computeType, scaleType, Atype/Btype,
// Ctype) combinations, real types only. (The same table governs 2.8.14 cublasGemmStridedBatchedEx.)
struct Combination {
  cublasComputeType_t compute;
  cudaDataType scale, ab, c;
};
constexpr Combination kSupported[] = {
    {CUBLAS_COMPUTE_16F, CUDA_R_16F, CUDA_R_16F, CUDA_R_16F},
    {CUBLAS_COMPUTE_16F_PEDANTIC, CUDA_R_16F, CUDA_R_16F, CUDA_R_16F},
    {CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF},
    {CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16F, CUDA_R_16F},
    {CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_32F},
    {CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16F, CUDA_R_32F},
    {CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F},
    {CUBLAS_COMPUTE_32F_PEDANTIC, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF},
    {CUBLAS_COMPUTE_32F_PEDANTIC, CUDA_R_32F, CUDA_R_16F, CUDA_R_16F},
    {CUBLAS_COMPUTE_32F_PEDANTIC, CUDA_R_32F, CUDA_R_16BF, CUDA_R_32F},
    {CUBLAS_COMPUTE_32F_PEDANTIC, CUDA_R_32F, CUDA_R_16F, CUDA_R_32F},
    {CUBLAS_COMPUTE_32F_PEDANTIC, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F},
    {CUBLAS_COMPUTE_32F_FAST_16F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F},
    {CUBLAS_COMPUTE_32F_FAST_16BF, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F},
    {CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F},
    {CUBLAS_COMPUTE_32F_EMULATED_16BFX9, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F},  // f32-accurate by design
    {CUBLAS_COMPUTE_64F, CUDA_R_64F, CUDA_R_64F, CUDA_R_64F},
    {CUBLAS_COMPUTE_64F_PEDANTIC, CUDA_R_64F, CUDA_R_64F, CUDA_R_64F},
    {CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT, CUDA_R_64F, CUDA_R_64F, CUDA_R_64F},  // f64-accurate by design
};

bool documented_but_not_emulated(cudaDataType t) {
  return t == CUDA_R_8I || t == CUDA_R_32I || t == CUDA_C_32F || t == CUDA_C_64F || t == CUDA_C_8I;
}

// The input rounding of a 32F-scaled GEMM with f32 inputs. cuBLAS docs, 2.2.12 cublasComputeType_t:
// the FAST types allow down-converting inputs (the emulator always does, so the loss shows); 2.2.11
// cublasMath_t: with CUBLAS_COMPUTE_32F, TF32_TENSOR_OP_MATH allows TF32 and the deprecated
// TENSOR_OP_MATH means COMPUTE_32F_FAST_16F. PEDANTIC compute types and PEDANTIC_MATH never round.
InputRounding input_rounding(cublasComputeType_t compute, cudaDataType ab, cublasMath_t math) {
  if (ab != CUDA_R_32F) return InputRounding::none;  // 16-bit inputs are exact in every compute type
  const int base = int(math) & ~int(CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
  switch (compute) {
    case CUBLAS_COMPUTE_32F_FAST_TF32: return InputRounding::tf32;
    case CUBLAS_COMPUTE_32F_FAST_16F: return InputRounding::f16;
    case CUBLAS_COMPUTE_32F_FAST_16BF: return InputRounding::bf16;
    case CUBLAS_COMPUTE_32F:
      if (base == CUBLAS_TF32_TENSOR_OP_MATH) return InputRounding::tf32;
      if (base == CUBLAS_TENSOR_OP_MATH) return InputRounding::f16;
      return InputRounding::none;
    default: return InputRounding::none;
  }
}

// The plan for a supported combination, or why there is none.
bool plan_for(const Gemm& g, cublasMath_t math, Plan* plan, std::string* why) {
  if (g.a.type != g.b.type) {
    *why = std::string("Atype ") + type_name(g.a.type) + " and Btype " + type_name(g.b.type) +
           " differ; cublasGemmEx's table has none such";
    return false;
  }
  for (const Combination& c : kSupported) {
    if (c.compute != g.compute || c.ab != g.a.type || c.c != g.c.type) continue;
    const bool f16 = g.compute == CUBLAS_COMPUTE_16F || g.compute == CUBLAS_COMPUTE_16F_PEDANTIC;
    const bool f64 = c.scale == CUDA_R_64F;
    *plan = Plan{f16 ? Accumulate::f16 : f64 ? Accumulate::f64 : Accumulate::f32, c.scale,
                 input_rounding(g.compute, g.a.type, math)};
    return true;
  }
  *why = std::string("A/B ") + type_name(g.a.type) + " to C " + type_name(g.c.type) + " with " +
         compute_name(g.compute) + " is not in cublasGemmEx's table of supported combinations";
  if (documented_but_not_emulated(g.a.type) || documented_but_not_emulated(g.c.type))
    *why += " (or is one the real library has but the emulator does not model: int8 and complex GEMMs)";
  return false;
}

// cublasGemmAlgo_t: the default, the numbered algorithms and their (deprecated) tensor-op twins.
bool known_algo(cublasGemmAlgo_t algo) {
  const int a = int(algo);
  return (a >= CUBLAS_GEMM_DEFAULT && a <= CUBLAS_GEMM_ALGO23) ||
         (a >= CUBLAS_GEMM_DEFAULT_TENSOR_OP && a <= CUBLAS_GEMM_ALGO15_TENSOR_OP) || a == CUBLAS_GEMM_AUTOTUNE;
}

// ---- host-side validation --------------------------------------------------------------------------

bool valid_op(cublasOperation_t op) { return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C; }

// Rows of op(X)'s stored form: cuBLAS docs, 2.7.1 cublas<t>gemm(): "lda < max(1, m) if transa ==
// CUBLAS_OP_N and lda < max(1, k) otherwise" is INVALID_VALUE, and the same for ldb with k and n.
int64_t stored_rows(cublasOperation_t op, int64_t rows_of_op, int64_t cols_of_op) {
  return op == CUBLAS_OP_N ? rows_of_op : cols_of_op;
}

// "" when the arguments pass cublas<t>gemm's / cublasGemmEx's INVALID_VALUE checks, else why not.
std::string invalid_value(const Gemm& g) {
  if (g.m < 0 || g.n < 0 || g.k < 0) return "m, n and k must not be negative";
  if (g.batch < 0) return "batchCount must not be negative";
  if (!valid_op(g.transa) || !valid_op(g.transb)) return "transa and transb must be CUBLAS_OP_N, _T or _C";
  const int64_t a_rows = std::max<int64_t>(1, stored_rows(g.transa, g.m, g.k));
  const int64_t b_rows = std::max<int64_t>(1, stored_rows(g.transb, g.k, g.n));
  if (g.a.ld < a_rows)
    return "lda " + std::to_string(g.a.ld) + " is below its minimum " + std::to_string(a_rows) +
           (g.transa == CUBLAS_OP_N ? " (max(1, m) for transa N)" : " (max(1, k) for transa T/C)");
  if (g.b.ld < b_rows)
    return "ldb " + std::to_string(g.b.ld) + " is below its minimum " + std::to_string(b_rows) +
           (g.transb == CUBLAS_OP_N ? " (max(1, k) for transb N)" : " (max(1, n) for transb T/C)");
  if (g.c.ld < std::max<int64_t>(1, g.m))
    return "ldc " + std::to_string(g.c.ld) + " is below its minimum max(1, m) = " + std::to_string(std::max<int64_t>(1, g.m));
  if (g.alpha == nullptr || g.beta == nullptr) return "alpha and beta must not be null";
  return "";
}

// ---- scalars ---------------------------------------------------------------------------------------

// alpha or beta, read as the scale type (cuBLAS docs, 2.8.12: alpha and beta have the scale type).
double read_scalar(const void* p, cudaDataType scale) {
  switch (scale) {
    case CUDA_R_16F: {
      __half h;
      std::memcpy(&h, p, sizeof h);
      return double(__half2float(h));
    }
    case CUDA_R_32F: {
      float f;
      std::memcpy(&f, p, sizeof f);
      return double(f);
    }
    default: {
      double d;
      std::memcpy(&d, p, sizeof d);
      return d;
    }
  }
}

// ---- device-side checks (inside the work) ----------------------------------------------------------

// Elements one batch of a stored [rows, cols] column-major matrix spans: the last column starts at
// (cols - 1) * ld and has `rows` elements.
int64_t span(int64_t rows, int64_t cols, int64_t ld) { return rows == 0 || cols == 0 ? 0 : (cols - 1) * ld + rows; }

// "" when every batch of `x` lies in device memory of `device`, else the fault, as on a GPU. (The
// stream prefixes the work's name to the text.)
std::string check_operand(const char* name, const Matrix& x, int64_t rows, int64_t cols, int64_t batches,
                          int device) {
  const size_t bytes = size_t(span(rows, cols, x.ld)) * element_bytes(x.type);
  if (bytes == 0) return "";
  for (int64_t i = 0; i < batches; ++i) {
    const std::string label =
        name + (batches > 1 ? " of batch " + std::to_string(i) : std::string()) + " (" +
        std::to_string(rows) + " x " + std::to_string(cols) + " elements of " + type_name(x.type) + ", ld " +
        std::to_string(x.ld) + ")";
    std::string error = check_device_range(label, offset_bytes(x.data, i * x.stride, x.type), bytes, device);
    if (!error.empty()) return error + " — an illegal address on a GPU";
  }
  return "";
}

std::string check_operands(const Gemm& g, int device) {
  std::string error;
  if (g.k > 0) {  // k == 0: C = beta C, A and B are not read
    error = check_operand("A", g.a, stored_rows(g.transa, g.m, g.k), stored_rows(g.transa, g.k, g.m), g.batch,
                          device);
    if (error.empty())
      error = check_operand("B", g.b, stored_rows(g.transb, g.k, g.n), stored_rows(g.transb, g.n, g.k),
                            g.batch, device);
  }
  if (error.empty()) error = check_operand("C", g.c, g.m, g.n, g.batch, device);
  return error;
}

// alpha or beta in device pointer mode: read when the work runs, from device memory.
std::string read_device_scalar(const char* name, const void* p, cudaDataType scale, int device, double* value) {
  const std::string error =
      check_device_range(std::string(name) + " (device pointer mode)", p, element_bytes(scale), device);
  if (!error.empty()) return error + " — an illegal address on a GPU";
  *value = read_scalar(p, scale);
  return "";
}

// ---- the common path of every entry point ----------------------------------------------------------

cublasStatus_t gemm(const Gemm& g) {
  int device = 0;
  cudaStream_t stream = nullptr;
  cublasPointerMode_t pointer_mode = CUBLAS_POINTER_MODE_HOST;
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
  const cublasStatus_t state = cublas_handle_state(g.handle, &device, &stream, &pointer_mode, &math);
  if (state != CUBLAS_STATUS_SUCCESS) return reject(state, g, "the handle is null or was destroyed");

  if (const std::string why = invalid_value(g); !why.empty()) return reject(CUBLAS_STATUS_INVALID_VALUE, g, why);
  Plan plan;
  if (std::string why; !plan_for(g, math, &plan, &why)) return reject(CUBLAS_STATUS_NOT_SUPPORTED, g, why);
  if (!known_algo(g.algo))
    return reject(CUBLAS_STATUS_NOT_SUPPORTED, g, "algo " + std::to_string(int(g.algo)) + " is not a cublasGemmAlgo_t");

  // cuBLAS docs, 2.1.2 "cuBLAS Context": the device of a handle "is assumed to remain unchanged
  // between the corresponding cublasCreate() and cublasDestroy() calls". On a GPU the kernel would be
  // launched in the wrong context: the launch fails (EXECUTION_FAILED) or worse.
  if (current_device() != device)
    return reject(CUBLAS_STATUS_EXECUTION_FAILED, g,
                  "the handle belongs to device " + std::to_string(device) + " (current at cublasCreate), but the "
                  "current device is " + std::to_string(current_device()) + "; create one handle per device");
  if (stream_device(stream) != device)
    return reject(CUBLAS_STATUS_EXECUTION_FAILED, g,
                  "the handle's stream belongs to device " + std::to_string(stream_device(stream)) +
                      ", the handle to device " + std::to_string(device));

  // cuBLAS docs, 2.1.5 "Scalar Parameters": in host pointer mode alpha and beta are read before the
  // call returns. They must be host memory: a host dereference of device memory would crash.
  const bool host_scalars = pointer_mode == CUBLAS_POINTER_MODE_HOST;
  double alpha = 0, beta = 0;
  if (host_scalars) {
    for (const void* p : {g.alpha, g.beta})
      if (check_device_range("", p, element_bytes(plan.scale), device).empty())
        return reject(CUBLAS_STATUS_INVALID_VALUE, g,
                      "in CUBLAS_POINTER_MODE_HOST alpha and beta must point to host memory, but one points to "
                      "device memory (the host read would crash on a GPU system; use CUBLAS_POINTER_MODE_DEVICE)");
    alpha = read_scalar(g.alpha, plan.scale);
    beta = read_scalar(g.beta, plan.scale);
    // 2.7.1: INVALID_VALUE "if ... C == NULL if C needs to be scaled".
    if (beta != 0 && g.c.data == nullptr && g.m > 0 && g.n > 0)
      return reject(CUBLAS_STATUS_INVALID_VALUE, g, "C is null but beta is not 0");
  }

  // Nothing to compute: no element of C exists (cuBLAS returns at once, reading nothing).
  if (g.m == 0 || g.n == 0 || g.batch == 0) return CUBLAS_STATUS_SUCCESS;

  const std::string what = describe(g);
  std::vector<Access> accesses;
  if (g.k > 0) accesses.push_back({g.a.data, false}), accesses.push_back({g.b.data, false});
  accesses.push_back({g.c.data, true});
  if (!host_scalars) accesses.push_back({g.alpha, false}), accesses.push_back({g.beta, false});

  enqueue(stream, what, std::move(accesses), [g, plan, device, host_scalars, alpha, beta]() -> std::string {
    double a = alpha, b = beta;
    if (!host_scalars) {
      if (std::string e = read_device_scalar("alpha", g.alpha, plan.scale, device, &a); !e.empty()) return e;
      if (std::string e = read_device_scalar("beta", g.beta, plan.scale, device, &b); !e.empty()) return e;
    }
    if (std::string e = check_operands(g, device); !e.empty()) return e;
    multiply(g, plan, a, b);
    return "";
  });
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

// The one function the entry points (cublas_entry_points.cpp) call: every GEMM, flattened.
cublasStatus_t cublas_gemm(const char* call, cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                           int64_t m, int64_t n, int64_t k, const void* alpha, const void* A, cudaDataType Atype,
                           int64_t lda, long long strideA, const void* B, cudaDataType Btype, int64_t ldb,
                           long long strideB, const void* beta, void* C, cudaDataType Ctype, int64_t ldc,
                           long long strideC, int64_t batch, cublasComputeType_t compute, cublasGemmAlgo_t algo) {
  return gemm(Gemm{call, handle, transa, transb, m, n, k, batch, alpha, beta, Matrix{A, Atype, lda, strideA},
                   Matrix{B, Btype, ldb, strideB}, Matrix{C, Ctype, ldc, strideC}, compute, algo});
}

}  // namespace brigade::emu
