// CPU reference kernels: matmul (see kernels/cpu/kernels.h for the contract).
//
// Two implementations of the same product:
//  - matmul_naive: the textbook triple loop, the readable definition and the test oracle;
//  - matmul / gemm: a cache-blocked, packed GEMM with a register-blocked micro-kernel, threaded over
//    output tiles. This is what training runs on.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "kernels/ops.h"

namespace brigade::cpu {

// A matrix seen through strides: element (i, j) lives at data[i * row_stride + j * col_stride].
// A transposed matrix is the same data with the strides (and sizes) swapped — no copy.
template <class T>
struct MatrixView {
  T* data = nullptr;
  int64_t rows = 0, cols = 0;
  int64_t row_stride = 0, col_stride = 0;

  T& operator()(int64_t i, int64_t j) const { return data[i * row_stride + j * col_stride]; }
  MatrixView transposed() const { return {data, cols, rows, col_stride, row_stride}; }
};

// c = a @ b, or c += a @ b when `accumulate`. Shapes: a [m, k], b [k, n], c [m, n]; c must not
// overlap a or b. Threaded over tiles of c; each element's sum over k runs in the same order for
// any thread count, so results are reproducible.
void gemm(const MatrixView<float>& c, const MatrixView<const float>& a, const MatrixView<const float>& b,
          bool accumulate = false);
void gemm(const MatrixView<double>& c, const MatrixView<const double>& a, const MatrixView<const double>& b,
          bool accumulate = false);

// matmul's contract (kernels/twins/matmul.inc), computed by the plain triple loop with no blocking
// or threading.
void matmul_naive(const Tensor& out, const Tensor& a, const Tensor& b);

}  // namespace brigade::cpu
