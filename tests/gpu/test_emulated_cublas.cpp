// The CUDA emulator's cuBLAS (emulator/cublas*.cpp), checked against the
// cuBLAS documentation: column-major storage with leading dimensions, op(A) and op(B), strided
// batches, beta == 0 never reading C, k == 0 giving beta C, the type combinations of cublasGemmEx,
// TF32 rounding, pointer modes, and every documented error status. Expected values come from hand
// computation or from the f64 reference below, written here and independent of the emulation.
// Padding that cuBLAS must not read holds NaN; padding it must not write holds a sentinel.
#include <catch2/catch.hpp>

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "emulator/runtime.h"
#include "kernels/cuda/gemm.h"

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kSentinel = -12345.0f;

// A cuBLAS handle for the test's scope.
struct Handle {
  cublasHandle_t h = nullptr;
  Handle() { REQUIRE(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS); }
  ~Handle() { cublasDestroy(h); }
  operator cublasHandle_t() const { return h; }
};

// Device memory holding a copy of `host`, freed at scope exit.
template <typename T>
struct DeviceArray {
  T* p = nullptr;
  size_t n = 0;
  explicit DeviceArray(const std::vector<T>& host) : n(host.size()) {
    REQUIRE(cudaMalloc(&p, n * sizeof(T)) == cudaSuccess);
    REQUIRE(cudaMemcpy(p, host.data(), n * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  }
  ~DeviceArray() { cudaFree(p); }
  std::vector<T> read() const {  // waits for the legacy default stream, the handles' default
    std::vector<T> host(n);
    REQUIRE(cudaMemcpy(host.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
    return host;
  }
};

// A column-major [rows, cols] matrix stored with leading dimension ld (>= rows): element (i, j) at
// i + j * ld; the ld - rows padding rows of each column hold `pad`.
template <typename T>
std::vector<T> stored(int rows, int cols, int ld, T pad, const std::function<T(int, int)>& value) {
  std::vector<T> out(size_t(ld) * cols, pad);
  for (int j = 0; j < cols; ++j)
    for (int i = 0; i < rows; ++i) out[size_t(i + j * ld)] = value(i, j);
  return out;
}

// The f64 reference: C = alpha op(A) op(B) + beta C, column-major, written from the BLAS definition.
// With beta == 0 the old C is ignored (BLAS: "when beta is zero, C need not be set on input").
struct Ref {
  bool ta, tb;  // op T for A, B
  int m, n, k;
  double alpha, beta;
};
std::vector<double> reference(const Ref& r, const std::vector<double>& A, int lda, const std::vector<double>& B,
                              int ldb, std::vector<double> C, int ldc) {
  for (int j = 0; j < r.n; ++j)
    for (int i = 0; i < r.m; ++i) {
      double sum = 0;
      for (int p = 0; p < r.k; ++p) {
        const double a = r.ta ? A[size_t(p + i * lda)] : A[size_t(i + p * lda)];
        const double b = r.tb ? B[size_t(j + p * ldb)] : B[size_t(p + j * ldb)];
        sum += a * b;
      }
      double& c = C[size_t(i + j * ldc)];
      c = r.alpha * sum + (r.beta == 0 ? 0.0 : r.beta * c);
    }
  return C;
}

template <typename T>
std::vector<double> to_double(const std::vector<T>& v) {
  std::vector<double> out;
  for (const T& x : v) out.push_back(double(x));
  return out;
}

std::vector<double> to_double(const std::vector<__nv_bfloat16>& v) {
  std::vector<double> out;
  for (const auto& x : v) out.push_back(double(__bfloat162float(x)));
  return out;
}

std::vector<double> to_double(const std::vector<__half>& v) {
  std::vector<double> out;
  for (const auto& x : v) out.push_back(double(__half2float(x)));
  return out;
}

// The bound on |f32 result - f64 reference| for sums of k products: k + 2 roundings of relative size
// 2^-24 each on the magnitudes involved (a generous form of the classical gamma_k bound).
double f32_bound(const Ref& r, const std::vector<double>& A, int lda, const std::vector<double>& B, int ldb,
                 const std::vector<double>& C, int ldc, int i, int j) {
  double magnitude = 0;
  for (int p = 0; p < r.k; ++p) {
    const double a = r.ta ? A[size_t(p + i * lda)] : A[size_t(i + p * lda)];
    const double b = r.tb ? B[size_t(j + p * ldb)] : B[size_t(p + j * ldb)];
    magnitude += std::fabs(a * b);
  }
  magnitude = std::fabs(r.alpha) * magnitude + (r.beta == 0 ? 0 : std::fabs(r.beta * C[size_t(i + j * ldc)]));
  return (r.k + 2) * std::ldexp(magnitude, -23) + 1e-30;
}

cublasOperation_t op(bool t) { return t ? CUBLAS_OP_T : CUBLAS_OP_N; }


// Synchronises and returns the asynchronous error of the work before, as "name: text" ("" when none).
// A GPU returns a kernel's fault from the synchronising call; an emulator runtime that does not yet
// (the frozen library of /work/snap) still hands it to the next cudaGetLastError, so look there too.
std::string synchronise_error(cudaStream_t stream) {
  cudaError_t e = stream ? cudaStreamSynchronize(stream) : cudaDeviceSynchronize();
  if (e == cudaSuccess) e = cudaGetLastError();
  return e == cudaSuccess ? "" : std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

}  // namespace

// ---- the handle and its helpers ----------------------------------------------------------------------

TEST_CASE("emulated cuBLAS: a handle keeps its stream, pointer mode and math mode", "[gpu][emulated_cublas]") {
  Handle handle;
  cudaStream_t stream = reinterpret_cast<cudaStream_t>(0x1);
  REQUIRE(cublasGetStream(handle, &stream) == CUBLAS_STATUS_SUCCESS);
  CHECK(stream == nullptr);  // the legacy default stream until cublasSetStream (docs 2.4.7)

  cudaStream_t mine = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&mine, cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(cublasSetStream(handle, mine) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(cublasGetStream(handle, &stream) == CUBLAS_STATUS_SUCCESS);
  CHECK(stream == mine);
  REQUIRE(cublasSetStream(handle, nullptr) == CUBLAS_STATUS_SUCCESS);
  cudaStreamDestroy(mine);

  cublasPointerMode_t pointer_mode = CUBLAS_POINTER_MODE_DEVICE;
  REQUIRE(cublasGetPointerMode(handle, &pointer_mode) == CUBLAS_STATUS_SUCCESS);
  CHECK(pointer_mode == CUBLAS_POINTER_MODE_HOST);
  REQUIRE(cublasSetPointerMode(handle, CUBLAS_POINTER_MODE_DEVICE) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(cublasGetPointerMode(handle, &pointer_mode) == CUBLAS_STATUS_SUCCESS);
  CHECK(pointer_mode == CUBLAS_POINTER_MODE_DEVICE);
  CHECK(cublasSetPointerMode(handle, cublasPointerMode_t(7)) == CUBLAS_STATUS_INVALID_VALUE);

  cublasMath_t math = CUBLAS_PEDANTIC_MATH;
  REQUIRE(cublasGetMathMode(handle, &math) == CUBLAS_STATUS_SUCCESS);
  CHECK(math == CUBLAS_DEFAULT_MATH);
  // brigade's mode (kernels/cuda/gemm_cublas.cpp): a base mode with the reduction flag or-ed in.
  const auto brigade_mode = cublasMath_t(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
  REQUIRE(cublasSetMathMode(handle, brigade_mode) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(cublasGetMathMode(handle, &math) == CUBLAS_STATUS_SUCCESS);
  CHECK(math == brigade_mode);
  CHECK(cublasSetMathMode(handle, cublasMath_t(5)) == CUBLAS_STATUS_INVALID_VALUE);
  CHECK(cublasSetMathMode(handle, cublasMath_t(CUBLAS_TF32_TENSOR_OP_MATH | 32)) == CUBLAS_STATUS_INVALID_VALUE);

  int version = 0;
  REQUIRE(cublasGetVersion(handle, &version) == CUBLAS_STATUS_SUCCESS);
  CHECK(version == CUBLAS_VERSION);
  CHECK(cublasGetVersion(handle, nullptr) == CUBLAS_STATUS_NOT_INITIALIZED);  // docs 2.4.3
  int major = 0;
  REQUIRE(cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS);
  CHECK(major == CUBLAS_VER_MAJOR);
}

TEST_CASE("emulated cuBLAS: status names and texts", "[gpu][emulated_cublas]") {
  CHECK(std::string(cublasGetStatusName(CUBLAS_STATUS_SUCCESS)) == "CUBLAS_STATUS_SUCCESS");
  CHECK(std::string(cublasGetStatusName(CUBLAS_STATUS_INVALID_VALUE)) == "CUBLAS_STATUS_INVALID_VALUE");
  CHECK(std::string(cublasGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED)) == "CUBLAS_STATUS_NOT_SUPPORTED");
  CHECK(std::string(cublasGetStatusName(CUBLAS_STATUS_NOT_INITIALIZED)) == "CUBLAS_STATUS_NOT_INITIALIZED");
  CHECK(std::string(cublasGetStatusString(CUBLAS_STATUS_INVALID_VALUE)).find("unsupported value") != std::string::npos);
  CHECK(std::string(cublasGetStatusString(cublasStatus_t(999))) == "unknown cuBLAS status");
}

TEST_CASE("emulated cuBLAS: null and destroyed handles are NOT_INITIALIZED", "[gpu][emulated_cublas]") {
  CHECK(cublasCreate(nullptr) == CUBLAS_STATUS_INVALID_VALUE);
  cublasHandle_t gone = nullptr;
  REQUIRE(cublasCreate(&gone) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(cublasDestroy(gone) == CUBLAS_STATUS_SUCCESS);
  CHECK(cublasDestroy(gone) == CUBLAS_STATUS_NOT_INITIALIZED);
  for (cublasHandle_t h : {gone, cublasHandle_t(nullptr)}) {
    CHECK(cublasSetStream(h, nullptr) == CUBLAS_STATUS_NOT_INITIALIZED);
    CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH) == CUBLAS_STATUS_NOT_INITIALIZED);
    CHECK(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST) == CUBLAS_STATUS_NOT_INITIALIZED);
    CHECK(cublasSetWorkspace(h, nullptr, 0) == CUBLAS_STATUS_NOT_INITIALIZED);
    const float one = 1;
    float c = 0;
    CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, &one, 1, &one, 1, &one, &c, 1) ==
          CUBLAS_STATUS_NOT_INITIALIZED);
  }
}

TEST_CASE("emulated cuBLAS: the workspace must be 256-byte aligned", "[gpu][emulated_cublas]") {
  Handle handle;
  void* workspace = nullptr;
  REQUIRE(cudaMalloc(&workspace, 4096) == cudaSuccess);
  CHECK(cublasSetWorkspace(handle, workspace, 4096) == CUBLAS_STATUS_SUCCESS);
  CHECK(cublasSetWorkspace(handle, static_cast<char*>(workspace) + 256, 1024) == CUBLAS_STATUS_SUCCESS);
  CHECK(cublasSetWorkspace(handle, static_cast<char*>(workspace) + 128, 1024) == CUBLAS_STATUS_INVALID_VALUE);
  CHECK(cublasSetWorkspace(handle, static_cast<char*>(workspace) + 16, 1024) == CUBLAS_STATUS_INVALID_VALUE);
  CHECK(cublasSetWorkspace(handle, nullptr, 0) == CUBLAS_STATUS_SUCCESS);
  // cublasSetStream resets it (docs 2.4.7); brigade sets its own after every cublasSetStream.
  CHECK(cublasSetStream(handle, nullptr) == CUBLAS_STATUS_SUCCESS);
  cudaFree(workspace);
}

// ---- layouts: column-major, op, leading dimensions, batches ----------------------------------------

TEST_CASE("emulated cuBLAS: a hand-computed 2x2 product is column-major", "[gpu][emulated_cublas]") {
  // A = [1 2; 3 4] is stored column-major as {1, 3, 2, 4}; B = [5 6; 7 8] as {5, 7, 6, 8}.
  // A B = [19 22; 43 50], stored {19, 43, 22, 50}; Aᵀ B = [26 30; 38 44], stored {26, 38, 30, 44}.
  Handle handle;
  DeviceArray<float> A({1, 3, 2, 4}), B({5, 7, 6, 8}), C({0, 0, 0, 0});
  const float one = 1, zero = 0;
  REQUIRE(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, A.p, 2, B.p, 2, &zero, C.p, 2) ==
          CUBLAS_STATUS_SUCCESS);
  CHECK(C.read() == std::vector<float>{19, 43, 22, 50});
  REQUIRE(cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, 2, 2, 2, &one, A.p, 2, B.p, 2, &zero, C.p, 2) ==
          CUBLAS_STATUS_SUCCESS);
  CHECK(C.read() == std::vector<float>{26, 38, 30, 44});
  // CUBLAS_OP_C is the transpose for real types.
  REQUIRE(cublasSgemm(handle, CUBLAS_OP_C, CUBLAS_OP_N, 2, 2, 2, &one, A.p, 2, B.p, 2, &zero, C.p, 2) ==
          CUBLAS_STATUS_SUCCESS);
  CHECK(C.read() == std::vector<float>{26, 38, 30, 44});
}

TEST_CASE("emulated cuBLAS: op N/T on each side with padded leading dimensions never reads the padding",
          "[gpu][emulated_cublas]") {
  Handle handle;
  const int m = 3, n = 4, k = 5;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      CAPTURE(ta, tb);
      // Stored A is [m, k] for N, [k, m] for T; padding rows (ld > rows) are NaN.
      const int a_rows = ta ? k : m, a_cols = ta ? m : k, lda = a_rows + 2;
      const int b_rows = tb ? n : k, b_cols = tb ? k : n, ldb = b_rows + 3;
      const int ldc = m + 1;
      auto a = stored<float>(a_rows, a_cols, lda, kNaN, [](int i, int j) { return float(i - 2 * j + 1); });
      auto b = stored<float>(b_rows, b_cols, ldb, kNaN, [](int i, int j) { return float(3 * i + j - 4); });
      auto c = stored<float>(m, n, ldc, kSentinel, [](int i, int j) { return float(i + 10 * j); });
      DeviceArray<float> A(a), B(b), C(c);
      const float alpha = 2, beta = -1;
      REQUIRE(cublasGemmEx(handle, op(ta), op(tb), m, n, k, &alpha, A.p, CUDA_R_32F, lda, B.p, CUDA_R_32F, ldb, &beta,
                           C.p, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS);
      const auto want = reference({ta, tb, m, n, k, 2, -1}, to_double(a), lda, to_double(b), ldb, to_double(c), ldc);
      const auto got = C.read();
      for (size_t i = 0; i < got.size(); ++i) {
        CAPTURE(i);
        if (int(i % ldc) >= m) CHECK(got[i] == kSentinel);  // C's padding is not written
        else CHECK(double(got[i]) == want[i]);             // small integers: exact
      }
    }
}

TEST_CASE("emulated cuBLAS: f32 GEMMs agree with the f64 reference within f32 rounding", "[gpu][emulated_cublas]") {
  Handle handle;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  const int m = 7, n = 5, k = 33;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      CAPTURE(ta, tb);
      const int lda = (ta ? k : m) + 1, ldb = (tb ? n : k) + 2, ldc = m;
      auto a = stored<float>(ta ? k : m, ta ? m : k, lda, kNaN, [&](int, int) { return dist(rng); });
      auto b = stored<float>(tb ? n : k, tb ? k : n, ldb, kNaN, [&](int, int) { return dist(rng); });
      auto c = stored<float>(m, n, ldc, kNaN, [&](int, int) { return dist(rng); });
      DeviceArray<float> A(a), B(b), C(c);
      const float alpha = 0.75f, beta = 0.5f;
      REQUIRE(cublasSgemm(handle, op(ta), op(tb), m, n, k, &alpha, A.p, lda, B.p, ldb, &beta, C.p, ldc) ==
              CUBLAS_STATUS_SUCCESS);
      const Ref r{ta, tb, m, n, k, 0.75, 0.5};
      const auto da = to_double(a), db = to_double(b), dc = to_double(c);
      const auto want = reference(r, da, lda, db, ldb, dc, ldc);
      const auto got = C.read();
      for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) {
          const size_t at = size_t(i + j * ldc);
          CHECK(std::fabs(double(got[at]) - want[at]) <= f32_bound(r, da, lda, db, ldb, dc, ldc, i, j));
        }
    }
}

TEST_CASE("emulated cuBLAS: strided batches with gaps between them", "[gpu][emulated_cublas]") {
  Handle handle;
  const int m = 2, n = 3, k = 4, batches = 3;
  const int lda = m, ldb = k + 1, ldc = m + 1;
  const long long stride_a = lda * k + 5, stride_b = ldb * n + 2, stride_c = ldc * n + 4;  // gaps
  std::vector<float> a(size_t(stride_a * batches), kNaN), b(size_t(stride_b * batches), kNaN);
  std::vector<float> c(size_t(stride_c * batches), kSentinel);
  for (int t = 0; t < batches; ++t) {
    for (int p = 0; p < k; ++p)
      for (int i = 0; i < m; ++i) a[size_t(t * stride_a + i + p * lda)] = float(t + i - p);
    for (int j = 0; j < n; ++j)
      for (int p = 0; p < k; ++p) b[size_t(t * stride_b + p + j * ldb)] = float(2 * t - j + p);
  }
  DeviceArray<float> A(a), B(b), C(c);
  const float alpha = 1, beta = 0;
  REQUIRE(cublasGemmStridedBatchedEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, A.p, CUDA_R_32F, lda, stride_a,
                                     B.p, CUDA_R_32F, ldb, stride_b, &beta, C.p, CUDA_R_32F, ldc, stride_c, batches,
                                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS);
  const auto got = C.read();
  for (int t = 0; t < batches; ++t) {
    CAPTURE(t);
    const std::vector<double> at(a.begin() + t * stride_a, a.begin() + (t + 1) * stride_a);
    const std::vector<double> bt(b.begin() + t * stride_b, b.begin() + (t + 1) * stride_b);
    const auto want = reference({false, false, m, n, k, 1, 0}, at, lda, bt, ldb,
                                std::vector<double>(size_t(stride_c), 0), ldc);
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) CHECK(double(got[size_t(t * stride_c + i + j * ldc)]) == want[size_t(i + j * ldc)]);
    for (long long e = 0; e < stride_c; ++e)  // padding rows and the gap after each batch: untouched
      if (e >= ldc * n || int(e % ldc) >= m) CHECK(got[size_t(t * stride_c + e)] == kSentinel);
  }

  // The typed forms: the same batches through cublasSgemmStridedBatched, and f64 through D.
  DeviceArray<float> C2(c);
  REQUIRE(cublasSgemmStridedBatched(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, A.p, lda, stride_a, B.p, ldb,
                                    stride_b, &beta, C2.p, ldc, stride_c, batches) == CUBLAS_STATUS_SUCCESS);
  CHECK(C2.read() == got);
  // batch 0 only, with a stride of 0 for B (one B broadcast): f64 keeps 2^-40.
  const double tiny = std::ldexp(1.0, -40);
  DeviceArray<double> DA({1 + tiny, 1 + tiny}), DB({1}), DC({0, 0});
  const double done = 1, dzero = 0;
  REQUIRE(cublasDgemmStridedBatched(handle, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &done, DA.p, 1, 1, DB.p, 1, 0, &dzero,
                                    DC.p, 1, 1, 2) == CUBLAS_STATUS_SUCCESS);
  CHECK(DC.read() == std::vector<double>{1 + tiny, 1 + tiny});
}

// ---- alpha, beta and empty sizes ---------------------------------------------------------------------

TEST_CASE("emulated cuBLAS: beta == 0 never reads C, beta == 1 accumulates", "[gpu][emulated_cublas]") {
  Handle handle;
  DeviceArray<float> A({1, 2}), B({3, 4});  // A [2, 1], B [1, 2]: the outer product [3 4; 6 8]
  DeviceArray<float> C({kNaN, kNaN, std::numeric_limits<float>::infinity(), kNaN});
  const float one = 1, zero = 0;
  REQUIRE(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 1, &one, A.p, 2, B.p, 1, &zero, C.p, 2) ==
          CUBLAS_STATUS_SUCCESS);
  CHECK(C.read() == std::vector<float>{3, 6, 4, 8});
  REQUIRE(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 1, &one, A.p, 2, B.p, 1, &one, C.p, 2) ==
          CUBLAS_STATUS_SUCCESS);
  CHECK(C.read() == std::vector<float>{6, 12, 8, 16});
  const float half = 0.5f, three = 3;
  REQUIRE(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 1, &three, A.p, 2, B.p, 1, &half, C.p, 2) ==
          CUBLAS_STATUS_SUCCESS);
  CHECK(C.read() == std::vector<float>{12, 24, 16, 32});  // 3 [3 4; 6 8] + [3 4; 6 8]
}

TEST_CASE("emulated cuBLAS: k == 0 gives beta C; m, n or batchCount 0 does nothing", "[gpu][emulated_cublas]") {
  Handle handle;
  DeviceArray<float> C({1, 2, 3, 4});
  const float one = 1, two = 2;
  // A and B are not read when k == 0: null is fine (lda, ldb still need their minimum max(1, .)).
  REQUIRE(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 0, &one, nullptr, 2, nullptr, 1, &two, C.p, 2) ==
          CUBLAS_STATUS_SUCCESS);
  CHECK(C.read() == std::vector<float>{2, 4, 6, 8});
  const float zero = 0;
  DeviceArray<float> D({kNaN, kNaN});
  REQUIRE(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, 2, 1, 0, &one, nullptr, 2, nullptr, 1, &zero, D.p, 2) ==
          CUBLAS_STATUS_SUCCESS);
  CHECK(D.read() == std::vector<float>{0, 0});  // beta == 0: C is not read, NaN or not

  // No element of C: nothing is read or written, even through null pointers.
  CHECK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, 0, 2, 3, &one, nullptr, 1, nullptr, 3, &two, nullptr, 1) ==
        CUBLAS_STATUS_SUCCESS);
  CHECK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, 2, 0, 3, &one, nullptr, 2, nullptr, 3, &two, nullptr, 2) ==
        CUBLAS_STATUS_SUCCESS);
  CHECK(cublasSgemmStridedBatched(handle, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, nullptr, 2, 4, nullptr, 2, 4, &two,
                                  C.p, 2, 4, 0) == CUBLAS_STATUS_SUCCESS);
  CHECK(C.read() == std::vector<float>{2, 4, 6, 8});
  CHECK(synchronise_error(nullptr).empty());
}

TEST_CASE("emulated cuBLAS: host-mode alpha is copied at the call, device-mode alpha read when the work runs",
          "[gpu][emulated_cublas]") {
  Handle handle;
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(cublasSetStream(handle, stream) == CUBLAS_STATUS_SUCCESS);
  DeviceArray<float> A({2}), B({3}), C({kNaN});
  // A gate holds the stream until the host opens it, so the GEMM provably runs after the host has
  // changed alpha. Where work runs on the issuing thread (BRIGADE_EMULATOR_STREAMS=sync, or a
  // synchronous emulator) the gate passes at once: the GEMM then runs at the call anyway.
  std::atomic<bool> open{false};
  const std::thread::id host = std::this_thread::get_id();
  brigade::emu::enqueue(stream, "gate", {}, [&open, host] {
    while (!open && std::this_thread::get_id() != host) std::this_thread::yield();
    return std::string();
  });
  float alpha = 5, beta = 0;
  REQUIRE(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &alpha, A.p, 1, B.p, 1, &beta, C.p, 1) ==
          CUBLAS_STATUS_SUCCESS);
  alpha = 100;  // too late: host-mode scalars are read before the call returns (docs 2.1.5)
  open = true;
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  CHECK(C.read() == std::vector<float>{30});

  REQUIRE(cublasSetPointerMode(handle, CUBLAS_POINTER_MODE_DEVICE) == CUBLAS_STATUS_SUCCESS);
  DeviceArray<float> dalpha({-1}), dbeta({0});
  DeviceArray<float> C2({kNaN});
  REQUIRE(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, dalpha.p, A.p, CUDA_R_32F, 1, B.p, CUDA_R_32F, 1,
                       dbeta.p, C2.p, CUDA_R_32F, 1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  CHECK(C2.read() == std::vector<float>{-6});  // beta (0) read on the device too: NaN in C not read
  // Device mode with alpha in host memory: the kernel would fault; reported at the synchronisation.
  const float host_alpha = 1;
  REQUIRE(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &host_alpha, A.p, CUDA_R_32F, 1, B.p, CUDA_R_32F, 1,
                       dbeta.p, C2.p, CUDA_R_32F, 1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS);
  const std::string error = synchronise_error(stream);
  CHECK_THAT(error, Catch::Contains("cudaErrorLaunchFailure"));
  CHECK_THAT(error, Catch::Contains("alpha (device pointer mode)"));

  // Host mode with alpha in device memory: the host read would crash on a GPU system.
  REQUIRE(cublasSetPointerMode(handle, CUBLAS_POINTER_MODE_HOST) == CUBLAS_STATUS_SUCCESS);
  CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, dalpha.p, A.p, CUDA_R_32F, 1, B.p, CUDA_R_32F, 1, &beta,
                     C2.p, CUDA_R_32F, 1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_INVALID_VALUE);
  cublasSetStream(handle, nullptr);
  cudaStreamDestroy(stream);
}

// ---- types and compute types ------------------------------------------------------------------------

TEST_CASE("emulated cuBLAS: 16-bit inputs accumulate in f32 and round once to the output",
          "[gpu][emulated_cublas]") {
  Handle handle;
  const float one = 1, zero = 0;
  SECTION("bf16 and f16 in, f32 out: the exact products of the 16-bit values") {
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> dist(-2, 2);
    const int m = 4, n = 3, k = 17;
    std::vector<__nv_bfloat16> a16(m * k), b16(k * n);
    std::vector<__half> ah(m * k), bh(k * n);
    for (auto& x : a16) x = __float2bfloat16(dist(rng));
    for (auto& x : b16) x = __float2bfloat16(dist(rng));
    for (auto& x : ah) x = __float2half(dist(rng));
    for (auto& x : bh) x = __float2half(dist(rng));
    const Ref r{false, false, m, n, k, 1, 0};
    const std::vector<double> zeros(m * n, 0);
    DeviceArray<__nv_bfloat16> A(a16), B(b16);
    DeviceArray<__half> AH(ah), BH(bh);
    DeviceArray<float> C(std::vector<float>(m * n, kNaN)), CH(std::vector<float>(m * n, kNaN));
    REQUIRE(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, A.p, CUDA_R_16BF, m, B.p, CUDA_R_16BF, k,
                         &zero, C.p, CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS);
    REQUIRE(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, AH.p, CUDA_R_16F, m, BH.p, CUDA_R_16F, k,
                         &zero, CH.p, CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS);
    const auto da = to_double(a16), db = to_double(b16), dah = to_double(ah), dbh = to_double(bh);
    const auto want = reference(r, da, m, db, k, zeros, m), want_h = reference(r, dah, m, dbh, k, zeros, m);
    const auto got = C.read(), got_h = CH.read();
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) {
        const size_t at = size_t(i + j * m);
        CHECK(std::fabs(double(got[at]) - want[at]) <= f32_bound(r, da, m, db, k, zeros, m, i, j));
        CHECK(std::fabs(double(got_h[at]) - want_h[at]) <= f32_bound(r, dah, m, dbh, k, zeros, m, i, j));
      }
  }
  SECTION("bf16 out: 256 + 1 + 1 is 258, not the 256 of rounding every step") {
    // bf16 keeps 8 significant bits: 257 is a tie that rounds to 256 (even), 258 is exact.
    std::vector<__nv_bfloat16> a = {__float2bfloat16(256), __float2bfloat16(1), __float2bfloat16(1)};
    DeviceArray<__nv_bfloat16> A(a), B(std::vector<__nv_bfloat16>(3, __float2bfloat16(1)));
    DeviceArray<__nv_bfloat16> C(std::vector<__nv_bfloat16>(1, __float2bfloat16(kNaN)));
    REQUIRE(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 3, &one, A.p, CUDA_R_16BF, 1, B.p, CUDA_R_16BF, 3,
                         &zero, C.p, CUDA_R_16BF, 1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS);
    CHECK(__bfloat162float(C.read()[0]) == 258.0f);
    // And once more rounded: 128 + 1 = 129 is exact in bf16, 256 + 1 is not (round to nearest even).
    DeviceArray<__nv_bfloat16> A2(std::vector<__nv_bfloat16>{__float2bfloat16(256), __float2bfloat16(1)});
    REQUIRE(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 2, &one, A2.p, CUDA_R_16BF, 1, B.p, CUDA_R_16BF, 2,
                         &zero, C.p, CUDA_R_16BF, 1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS);
    CHECK(__bfloat162float(C.read()[0]) == 256.0f);
    // 256 + 1 + 1 + 1 = 259 is the tie between 258 (odd last bit) and 260 (even): 260, where
    // truncation would give 258 and rounding every step 256.
    DeviceArray<__nv_bfloat16> A3(std::vector<__nv_bfloat16>{__float2bfloat16(256), __float2bfloat16(1),
                                                             __float2bfloat16(1), __float2bfloat16(1)});
    DeviceArray<__nv_bfloat16> B3(std::vector<__nv_bfloat16>(4, __float2bfloat16(1)));
    REQUIRE(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 4, &one, A3.p, CUDA_R_16BF, 1, B3.p, CUDA_R_16BF, 4,
                         &zero, C.p, CUDA_R_16BF, 1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS);
    CHECK(__bfloat162float(C.read()[0]) == 260.0f);
  }
  SECTION("f16 out: 2048 + 1 + 1 is 2050 with COMPUTE_32F, 2048 with half accumulation (COMPUTE_16F)") {
    std::vector<__half> a = {__float2half(2048), __float2half(1), __float2half(1)};
    DeviceArray<__half> A(a), B(std::vector<__half>(3, __float2half(1))), C(std::vector<__half>(1, __float2half(0)));
    REQUIRE(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, 1, 1, 3, &one, A.p, CUDA_R_16F, 3, B.p, CUDA_R_16F, 3, &zero,
                         C.p, CUDA_R_16F, 1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS);
    CHECK(__half2float(C.read()[0]) == 2050.0f);
    const __half one_h = __float2half(1), zero_h = __float2half(0);  // COMPUTE_16F scales with half
    REQUIRE(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, 1, 1, 3, &one_h, A.p, CUDA_R_16F, 3, B.p, CUDA_R_16F, 3,
                         &zero_h, C.p, CUDA_R_16F, 1, CUBLAS_COMPUTE_16F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS);
    CHECK(__half2float(C.read()[0]) == 2048.0f);
  }
}

TEST_CASE("emulated cuBLAS: TF32 rounds f32 inputs to 10 mantissa bits, to nearest", "[gpu][emulated_cublas]") {
  Handle handle;
  // 1 + 3 * 2^-12 lies between the TF32 neighbours 1 and 1 + 2^-10, nearer the upper: TF32 gives
  // 1 + 2^-10 (truncation would give 1). 1 + 2^-12 rounds down to 1.
  const float x = 1 + 3 * std::ldexp(1.0f, -12), y = 1 + std::ldexp(1.0f, -12);
  const float up = 1 + std::ldexp(1.0f, -10);
  DeviceArray<float> A({x, y}), B({1}), C({0, 0});
  const float one = 1, zero = 0;
  auto run = [&](cublasComputeType_t compute) {
    REQUIRE(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, 2, 1, 1, &one, A.p, CUDA_R_32F, 2, B.p, CUDA_R_32F, 1, &zero,
                         C.p, CUDA_R_32F, 2, compute, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS);
    return C.read();
  };
  CHECK(run(CUBLAS_COMPUTE_32F) == std::vector<float>{x, y});
  CHECK(run(CUBLAS_COMPUTE_32F_FAST_TF32) == std::vector<float>{up, 1});
  // FAST_16BF keeps 7 explicit bits: both round to 1; FAST_16F keeps 10, as TF32 here.
  CHECK(run(CUBLAS_COMPUTE_32F_FAST_16BF) == std::vector<float>{1, 1});
  CHECK(run(CUBLAS_COMPUTE_32F_FAST_16F) == std::vector<float>{up, 1});
  // The math mode: TF32_TENSOR_OP_MATH lets COMPUTE_32F (and Sgemm) use TF32, not the PEDANTIC type.
  REQUIRE(cublasSetMathMode(handle, CUBLAS_TF32_TENSOR_OP_MATH) == CUBLAS_STATUS_SUCCESS);
  CHECK(run(CUBLAS_COMPUTE_32F) == std::vector<float>{up, 1});
  CHECK(run(CUBLAS_COMPUTE_32F_PEDANTIC) == std::vector<float>{x, y});
  REQUIRE(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, 2, 1, 1, &one, A.p, 2, B.p, 1, &zero, C.p, 2) ==
          CUBLAS_STATUS_SUCCESS);
  CHECK(C.read() == std::vector<float>{up, 1});
  REQUIRE(cublasSetMathMode(handle, CUBLAS_PEDANTIC_MATH) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, 2, 1, 1, &one, A.p, 2, B.p, 1, &zero, C.p, 2) ==
          CUBLAS_STATUS_SUCCESS);
  CHECK(C.read() == std::vector<float>{x, y});
  // The disallow-reduced-precision flag is accepted and changes nothing for f32.
  REQUIRE(cublasSetMathMode(handle, cublasMath_t(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)) ==
          CUBLAS_STATUS_SUCCESS);
  CHECK(run(CUBLAS_COMPUTE_32F) == std::vector<float>{x, y});
}

// ---- errors ---------------------------------------------------------------------------------------------

TEST_CASE("emulated cuBLAS: invalid arguments return their documented status at once", "[gpu][emulated_cublas]") {
  Handle handle;
  DeviceArray<float> A(std::vector<float>(64, 1)), B(std::vector<float>(64, 1)), C(std::vector<float>(64, 0));
  const float one = 1, zero = 0;
  auto ex = [&](cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, int lda, int ldb, int ldc,
                cudaDataType at = CUDA_R_32F, cudaDataType bt = CUDA_R_32F, cudaDataType ct = CUDA_R_32F,
                cublasComputeType_t compute = CUBLAS_COMPUTE_32F, const void* alpha = nullptr,
                const void* beta = nullptr, cublasGemmAlgo_t algo = CUBLAS_GEMM_DEFAULT) {
    return cublasGemmEx(handle, ta, tb, m, n, k, alpha ? alpha : &one, A.p, at, lda, B.p, bt, ldb,
                        beta ? beta : &zero, C.p, ct, ldc, compute, algo);
  };
  const auto N = CUBLAS_OP_N, T = CUBLAS_OP_T;
  CHECK(ex(N, N, 2, 3, 4, 2, 4, 2) == CUBLAS_STATUS_SUCCESS);  // the baseline is valid
  // Negative sizes.
  CHECK(ex(N, N, -1, 3, 4, 2, 4, 2) == CUBLAS_STATUS_INVALID_VALUE);
  CHECK(ex(N, N, 2, -1, 4, 2, 4, 2) == CUBLAS_STATUS_INVALID_VALUE);
  CHECK(ex(N, N, 2, 3, -1, 2, 4, 2) == CUBLAS_STATUS_INVALID_VALUE);
  // Ops: N, T, C only (CONJG is a placeholder the header says is unsupported).
  CHECK(ex(CUBLAS_OP_CONJG, N, 2, 3, 4, 4, 4, 2) == CUBLAS_STATUS_INVALID_VALUE);
  CHECK(ex(N, cublasOperation_t(9), 2, 3, 4, 2, 4, 2) == CUBLAS_STATUS_INVALID_VALUE);
  // Leading dimensions: lda >= max(1, m) for N, max(1, k) for T; ldb >= max(1, k) for N, max(1, n)
  // for T; ldc >= max(1, m).
  CHECK(ex(N, N, 2, 3, 4, 1, 4, 2) == CUBLAS_STATUS_INVALID_VALUE);
  CHECK(ex(T, N, 2, 3, 4, 3, 4, 2) == CUBLAS_STATUS_INVALID_VALUE);
  CHECK(ex(T, N, 2, 3, 4, 4, 4, 2) == CUBLAS_STATUS_SUCCESS);
  CHECK(ex(N, N, 2, 3, 4, 2, 3, 2) == CUBLAS_STATUS_INVALID_VALUE);
  CHECK(ex(N, T, 2, 3, 4, 2, 2, 2) == CUBLAS_STATUS_INVALID_VALUE);
  CHECK(ex(N, T, 2, 3, 4, 2, 3, 2) == CUBLAS_STATUS_SUCCESS);
  CHECK(ex(N, N, 2, 3, 4, 2, 4, 1) == CUBLAS_STATUS_INVALID_VALUE);
  CHECK(ex(N, N, 0, 3, 4, 0, 4, 1) == CUBLAS_STATUS_INVALID_VALUE);  // max(1, m): 0 is too small even for m = 0
  CHECK(ex(N, N, 0, 3, 4, 1, 4, 1) == CUBLAS_STATUS_SUCCESS);
  // Null alpha or beta (the helper substitutes only for nullptr, so pass them through the raw call).
  CHECK(cublasGemmEx(handle, N, N, 2, 3, 4, nullptr, A.p, CUDA_R_32F, 2, B.p, CUDA_R_32F, 4, &zero, C.p, CUDA_R_32F, 2,
                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_INVALID_VALUE);
  CHECK(cublasSgemm(handle, N, N, 2, 3, 4, &one, A.p, 2, B.p, 4, nullptr, C.p, 2) == CUBLAS_STATUS_INVALID_VALUE);
  // C null while beta != 0 needs it scaled.
  CHECK(cublasSgemm(handle, N, N, 2, 3, 4, &one, A.p, 2, B.p, 4, &one, nullptr, 2) == CUBLAS_STATUS_INVALID_VALUE);
  // Type combinations outside cublasGemmEx's table.
  CHECK(ex(N, N, 2, 3, 4, 2, 4, 2, CUDA_R_32F, CUDA_R_32F, CUDA_R_16F) == CUBLAS_STATUS_NOT_SUPPORTED);
  CHECK(ex(N, N, 2, 3, 4, 2, 4, 2, CUDA_R_16F, CUDA_R_16BF, CUDA_R_32F) == CUBLAS_STATUS_NOT_SUPPORTED);
  CHECK(ex(N, N, 2, 3, 4, 2, 4, 2, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_64F) ==
        CUBLAS_STATUS_NOT_SUPPORTED);
  CHECK(ex(N, N, 2, 3, 4, 2, 4, 2, CUDA_R_16BF, CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32) ==
        CUBLAS_STATUS_NOT_SUPPORTED);
  CHECK(ex(N, N, 2, 3, 4, 2, 4, 2, CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_16F) ==
        CUBLAS_STATUS_NOT_SUPPORTED);
  CHECK(ex(N, N, 2, 3, 4, 2, 4, 2, CUDA_R_64F, CUDA_R_64F, CUDA_R_32F, CUBLAS_COMPUTE_64F) ==
        CUBLAS_STATUS_NOT_SUPPORTED);
  // An algorithm that is not a cublasGemmAlgo_t.
  CHECK(ex(N, N, 2, 3, 4, 2, 4, 2, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, nullptr, nullptr,
           cublasGemmAlgo_t(50)) == CUBLAS_STATUS_NOT_SUPPORTED);
  CHECK(ex(N, N, 2, 3, 4, 2, 4, 2, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, nullptr, nullptr,
           CUBLAS_GEMM_DEFAULT_TENSOR_OP) == CUBLAS_STATUS_SUCCESS);
  // batchCount < 0.
  CHECK(cublasGemmStridedBatchedEx(handle, N, N, 2, 3, 4, &one, A.p, CUDA_R_32F, 2, 8, B.p, CUDA_R_32F, 4, 12, &zero,
                                   C.p, CUDA_R_32F, 2, 6, -1, CUBLAS_COMPUTE_32F,
                                   CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_INVALID_VALUE);
  CHECK(cublasDgemmStridedBatched(handle, N, N, 1, 1, 1, nullptr, nullptr, 1, 0, nullptr, 1, 0, nullptr, nullptr, 1, 0,
                                  -2) == CUBLAS_STATUS_INVALID_VALUE);
  CHECK(synchronise_error(nullptr).empty());  // none of the rejected calls queued anything
}

TEST_CASE("emulated cuBLAS: a host pointer or a range past an allocation faults at the next synchronisation",
          "[gpu][emulated_cublas]") {
  Handle handle;
  std::vector<float> host_a(4, 1);
  DeviceArray<float> B(std::vector<float>(4, 1)), C(std::vector<float>(4, 0));
  const float one = 1, zero = 0;
  // The call itself succeeds: cuBLAS cannot tell host from device pointers before its kernel runs.
  REQUIRE(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, host_a.data(), CUDA_R_32F, 2, B.p, CUDA_R_32F,
                       2, &zero, C.p, CUDA_R_32F, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS);
  std::string error = synchronise_error(nullptr);
  CHECK_THAT(error, Catch::Contains("cudaErrorLaunchFailure"));
  CHECK_THAT(error, Catch::Contains("cublasGemmEx(N, N, m=2, n=2, k=2"));
  CHECK_THAT(error, Catch::Contains(": A ("));
  CHECK_THAT(error, Catch::Contains("illegal address"));
  CHECK(synchronise_error(nullptr).empty());  // reported once

  // ldb 3 makes B span (2 - 1) * 3 + 2 = 5 floats of a 4-float allocation; on a user stream.
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(cublasSetStream(handle, stream) == CUBLAS_STATUS_SUCCESS);
  DeviceArray<float> A(std::vector<float>(4, 1));
  REQUIRE(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, A.p, 2, B.p, 3, &zero, C.p, 2) ==
          CUBLAS_STATUS_SUCCESS);
  error = synchronise_error(stream);
  CHECK_THAT(error, Catch::Contains("cublasSgemm"));
  CHECK_THAT(error, Catch::Contains(": B ("));
  CHECK_THAT(error, Catch::Contains("ld 3"));
  // A later batch past the end: batch 1 of C starts at element 4 of a 4-element allocation.
  REQUIRE(cublasSgemmStridedBatched(handle, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, A.p, 2, 0, B.p, 2, 0, &zero, C.p,
                                    2, 4, 2) == CUBLAS_STATUS_SUCCESS);
  error = synchronise_error(stream);
  CHECK_THAT(error, Catch::Contains("C of batch 1"));
  cublasSetStream(handle, nullptr);
  cudaStreamDestroy(stream);
}

TEST_CASE("emulated cuBLAS: a handle belongs to the device current at cublasCreate", "[gpu][emulated_cublas]") {
  int count = 0;
  REQUIRE(cudaGetDeviceCount(&count) == cudaSuccess);
  if (count < 2) {
    WARN("one emulated GPU: run with BRIGADE_EMULATED_GPUS=2 to check handles on two devices");
    return;
  }
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  Handle handle;  // device 0's
  DeviceArray<float> A({2}), B({3}), C({0});
  const float one = 1, zero = 0;
  REQUIRE(cudaSetDevice(1) == cudaSuccess);
  CHECK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, A.p, 1, B.p, 1, &zero, C.p, 1) ==
        CUBLAS_STATUS_EXECUTION_FAILED);
  // A stream of device 1 on device 0's handle fails the same way.
  cudaStream_t stream1 = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&stream1, cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  REQUIRE(cublasSetStream(handle, stream1) == CUBLAS_STATUS_SUCCESS);
  CHECK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, A.p, 1, B.p, 1, &zero, C.p, 1) ==
        CUBLAS_STATUS_EXECUTION_FAILED);
  REQUIRE(cublasSetStream(handle, nullptr) == CUBLAS_STATUS_SUCCESS);
  CHECK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, A.p, 1, B.p, 1, &zero, C.p, 1) ==
        CUBLAS_STATUS_SUCCESS);
  CHECK(C.read() == std::vector<float>{6});
  // Memory of device 1 handed to device 0's handle: a fault when the work runs.
  REQUIRE(cudaSetDevice(1) == cudaSuccess);
  {
    DeviceArray<float> C1({0});
    REQUIRE(cudaSetDevice(0) == cudaSuccess);
    REQUIRE(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, A.p, 1, B.p, 1, &zero, C1.p, 1) ==
            CUBLAS_STATUS_SUCCESS);
    CHECK_THAT(synchronise_error(nullptr), Catch::Contains("memory of device 1"));
  }
  cudaSetDevice(1);
  cudaStreamDestroy(stream1);
  cudaSetDevice(0);
}

// ---- brigade's own call site ------------------------------------------------------------------------

TEST_CASE("emulated cuBLAS: brigade's gemm_cublas runs on the emulation", "[gpu][emulated_cublas]") {
  // kernels/cuda/gemm_cublas.cpp, unchanged: row-major C = A @ B as column-major Cᵀ = Bᵀ Aᵀ, a batch
  // of 2 with a transposed A (strides swapped) and a broadcast B (batch stride 0).
  const int64_t m = 3, k = 4, n = 2, batch = 2;
  std::vector<float> a(size_t(batch * k * m)), b(size_t(k * n));
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(int(i % 7) - 3);
  for (size_t i = 0; i < b.size(); ++i) b[i] = float(int(i % 5) - 2);
  DeviceArray<float> A(a), B(b), C(std::vector<float>(size_t(batch * m * n), kNaN));
  brigade::cuda::GemmProblem p;
  p.m = m, p.n = n, p.k = k, p.batch = batch;
  p.in = p.out = brigade::DType::f32;
  p.a = {A.p, 1, m, k * m};  // A_t(r, q) at r + q * m: the transpose of a stored [k, m]
  p.b = {B.p, n, 1, 0};
  p.c = {C.p, n, m * n};
  brigade::cuda::gemm_cublas(p, nullptr);
  const auto got = C.read();
  for (int64_t t = 0; t < batch; ++t)
    for (int64_t r = 0; r < m; ++r)
      for (int64_t c = 0; c < n; ++c) {
        double want = 0;
        for (int64_t q = 0; q < k; ++q) want += double(a[size_t(t * k * m + r + q * m)]) * b[size_t(q * n + c)];
        CHECK(double(got[size_t(t * m * n + r * n + c)]) == want);
      }
}
