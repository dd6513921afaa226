// The cuBLAS GEMM: one cublasGemmStridedBatchedEx call per problem, and the per-thread handles.
//
// cuBLAS is column-major; brigade is row-major. A row-major matrix read column-major is its
// transpose, so instead of C = A @ B we ask cuBLAS for Cᵀ = Bᵀ @ Aᵀ: the same bytes, B passed first.
// Each operand says through an op flag whether cuBLAS should read its bytes as they are (N) or
// transposed (T) — a transposed view costs nothing as long as one of its strides is 1.
#include <climits>
#include <optional>
#include <vector>

#include "core/cuda/check.h"
#include "kernels/cuda/cublas.h"
#include "kernels/cuda/gemm.h"
#include "kernels/ops.h"

namespace brigade::cuda {
namespace {

// 32 MiB, what NVIDIA recommends for cuBLAS on Hopper.
constexpr size_t kWorkspaceBytes = size_t(32) << 20;

struct ThreadHandles {
  std::vector<cublasHandle_t> by_device;
  ~ThreadHandles() {
    for (cublasHandle_t h : by_device)
      if (h) cublasDestroy(h);  // at thread exit; nothing to report to
  }
};

// How cuBLAS reads one of our [rows, cols] matrices as the column-major Xᵀ it needs: the op flag and
// the leading dimension, or nothing when neither stride is 1 (or rows overlap).
struct ColumnMajor {
  cublasOperation_t op;
  int64_t ld;
};
std::optional<ColumnMajor> column_major(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
  // Unit stride along columns: the bytes, read column-major with ld = row stride, are Xᵀ already.
  if ((col_stride == 1 || cols == 1) && (rows == 1 || row_stride >= cols))
    return ColumnMajor{CUBLAS_OP_N, rows == 1 ? std::max<int64_t>(cols, 1) : row_stride};
  // Unit stride along rows: the bytes are X column-major with ld = col stride; ask for the transpose.
  if ((row_stride == 1 || rows == 1) && (cols == 1 || col_stride >= rows))
    return ColumnMajor{CUBLAS_OP_T, cols == 1 ? std::max<int64_t>(rows, 1) : col_stride};
  return std::nullopt;
}

cudaDataType cuda_type(DType t) {
  switch (t) {
    case DType::f32: return CUDA_R_32F;
    case DType::f64: return CUDA_R_64F;
    case DType::bf16: return CUDA_R_16BF;
    case DType::f16: return CUDA_R_16F;
    default: fail("matmul (cublas): no cuBLAS type for ", dtype_name(t));
  }
}

int to_int(int64_t v, const char* what, const GemmProblem& p) {
  BRIGADE_CHECK(v <= INT_MAX, "matmul (cublas): ", what, " ", v, " does not fit cuBLAS's 32-bit sizes (problem [",
                p.m, ", ", p.k, "] @ [", p.k, ", ", p.n, "])");
  return int(v);
}

}  // namespace

CublasCall cublas_call(Device device, cudaStream_t stream) {
  thread_local ThreadHandles handles;
  const size_t index = size_t(device.index);
  if (handles.by_device.size() <= index) handles.by_device.resize(index + 1, nullptr);
  cublasHandle_t& handle = handles.by_device[index];
  if (!handle) {
    BRIGADE_CUBLAS_CHECK(cublasCreate(&handle));
    // Reductions inside cuBLAS (split-K) stay in f32 even when C is 16-bit: one rounding, at the end.
    const int mode = CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
    BRIGADE_CUBLAS_CHECK(cublasSetMathMode(handle, cublasMath_t(mode)));
  }
  // cuBLAS wants a 256-byte aligned workspace: allocator blocks are whole cudaMalloc blocks, which are.
  CublasCall call{handle, empty({int64_t(kWorkspaceBytes / 4)}, DType::f32, device)};
  // cublasSetStream also resets the workspace to cuBLAS's own pool, so set ours after it, every time.
  BRIGADE_CUBLAS_CHECK(cublasSetStream(handle, stream));
  BRIGADE_CUBLAS_CHECK(cublasSetWorkspace(handle, call.workspace.raw_data(), kWorkspaceBytes));
  return call;
}

bool cublas_can_read(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
  return column_major(rows, cols, row_stride, col_stride).has_value();
}

void gemm_cublas(const GemmProblem& p, cudaStream_t stream) {
  const auto a = column_major(p.m, p.k, p.a.row_stride, p.a.col_stride);
  const auto b = column_major(p.k, p.n, p.b.row_stride, p.b.col_stride);
  BRIGADE_CHECK(a && b, "matmul (cublas): an operand has no unit stride (strides [", p.a.row_stride, ", ",
                p.a.col_stride, "] and [", p.b.row_stride, ", ", p.b.col_stride, "])");
  BRIGADE_CHECK(p.out == p.in || (p.out == DType::f32 && (p.in == DType::bf16 || p.in == DType::f16)),
                "matmul (cublas): no GEMM from ", dtype_name(p.in), " to ", dtype_name(p.out));
  const int m = to_int(p.m, "m", p), n = to_int(p.n, "n", p), k = to_int(p.k, "k", p);
  const int lda = to_int(a->ld, "a's leading dimension", p), ldb = to_int(b->ld, "b's leading dimension", p);
  BRIGADE_CHECK(p.m == 1 || p.c.row_stride >= p.n, "matmul (cublas): output rows overlap (row stride ",
                p.c.row_stride, " for ", p.n, " columns)");
  const int ldc = to_int(p.m == 1 ? p.n : p.c.row_stride, "c's leading dimension", p);
  const int batch = to_int(p.batch, "batch", p);

  int device = 0;
  BRIGADE_CUDA_CHECK(cudaGetDevice(&device));
  const CublasCall call = cublas_call(Device::cuda(device), stream);

  const double one_d = 1, zero_d = 0;
  const float one_f = 1, zero_f = 0;
  const bool f64 = p.in == DType::f64;
  cublasComputeType_t compute = f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
  if (p.in == DType::f32 && ops::allow_tf32()) compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  const void* alpha = f64 ? static_cast<const void*>(&one_d) : &one_f;
  const void* beta = f64 ? static_cast<const void*>(&zero_d) : &zero_f;
  const cudaDataType in = cuda_type(p.in), out = cuda_type(p.out);

  // Cᵀ [n, m] = Bᵀ [n, k] @ Aᵀ [k, m], all column-major.
  BRIGADE_CUBLAS_CHECK(cublasGemmStridedBatchedEx(call.handle, b->op, a->op, n, m, k, alpha, p.b.data, in, ldb,
                                                  p.b.batch_stride, p.a.data, in, lda, p.a.batch_stride, beta,
                                                  p.c.data, out, ldc, p.c.batch_stride, batch, compute,
                                                  CUBLAS_GEMM_DEFAULT));
}

}  // namespace brigade::cuda
