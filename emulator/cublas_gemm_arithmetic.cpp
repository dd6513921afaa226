// The CUDA emulator's cuBLAS: the arithmetic of a GEMM, once cublas_gemm.cpp has validated the call
// and the work runs on its stream.
//
// Arithmetic (cuBLAS docs, 1.1 "Data Layout": column-major, element (i, j) at i + j * ld): every
// product of a C element sums op(A)(i, p) * op(B)(p, j) for p = 0 .. k-1 in order, in the compute
// type's precision (f32 for the 32F compute types, f64 for 64F, f16 after every step for 16F), then
// alpha * sum + beta * C is rounded once to C's type (round to nearest even). With beta == 0 C is not
// read, so NaN or garbage in it cannot leak into the result. Fast compute types and tensor-op math
// modes round f32 inputs first (TF32: 10 explicit mantissa bits; FAST_16F, FAST_16BF: to that type).
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "emulator/cublas_gemm.h"

namespace brigade::emu {
namespace {

// Round to TF32, 10 explicit mantissa bits: round to nearest with ties away from zero, as
// cvt.rna.tf32.f32 (PTX ISA, cvt) and the CUDA C++ Programming Guide's __float_to_tf32 do. Adding
// half a unit of the last kept place to the magnitude bits and clearing the 13 dropped bits does
// that, carrying into the exponent when the mantissa overflows.
float round_to_tf32(float x) {
  if (!std::isfinite(x)) return x;
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  bits = (bits + 0x1000u) & ~0x1FFFu;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

double load(const void* base, cudaDataType t, int64_t index) {
  switch (t) {
    case CUDA_R_16F: return double(__half2float(static_cast<const __half*>(base)[index]));
    case CUDA_R_16BF: return double(__bfloat162float(static_cast<const __nv_bfloat16*>(base)[index]));
    case CUDA_R_32F: return double(static_cast<const float*>(base)[index]);
    default: return static_cast<const double*>(base)[index];
  }
}

double round_input(double x, InputRounding r) {
  switch (r) {
    case InputRounding::tf32: return double(round_to_tf32(float(x)));
    case InputRounding::f16: return double(__half2float(__float2half_rn(float(x))));
    case InputRounding::bf16: return double(__bfloat162float(__float2bfloat16_rn(float(x))));
    default: return x;
  }
}

// The arithmetic of each accumulation: T holds the running value, round() is applied after every
// operation (only f16 needs it: f32 and f64 arithmetic round by themselves).
struct F32 {
  using T = float;
  static T round(T x) { return x; }
};
struct F64 {
  using T = double;
  static T round(T x) { return x; }
};
struct F16 {  // half arithmetic, done in double and rounded to half after each step
  using T = double;
  static T round(T x) { return double(__half2float(__double2half(x))); }
};

template <typename Math>
void store(void* base, cudaDataType t, int64_t index, typename Math::T v) {
  // One rounding, from the accumulator's type straight to C's (round to nearest even).
  switch (t) {
    case CUDA_R_16F:
      static_cast<__half*>(base)[index] = std::is_same_v<typename Math::T, float> ? __float2half_rn(float(v))
                                                                                  : __double2half(double(v));
      return;
    case CUDA_R_16BF: static_cast<__nv_bfloat16*>(base)[index] = __float2bfloat16_rn(float(v)); return;
    case CUDA_R_32F: static_cast<float*>(base)[index] = float(v); return;
    default: static_cast<double*>(base)[index] = double(v); return;
  }
}

// op(X) of one batch as a dense [rows, depth] array of the accumulator's type, row r holding
// op(X)(r, 0 .. depth-1) when `rows_first`, else column-wise: A gives [m, k] rows, B gives [n, k]
// columns of op(B), so the inner loop of the product walks both contiguously.
template <typename Math>
std::vector<typename Math::T> gather(const void* base, const Matrix& x, cublasOperation_t op, int64_t outer,
                                     int64_t depth, bool x_is_a, InputRounding rounding) {
  std::vector<typename Math::T> out(size_t(outer * depth));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t p = 0; p < depth; ++p) {
      // A: op(A)(o, p); B: op(B)(p, o). Stored column-major: element (i, j) at i + j * ld, and op T/C
      // reads the stored matrix transposed (C is T for real types).
      const int64_t row = x_is_a ? o : p, col = x_is_a ? p : o;
      const int64_t index = op == CUBLAS_OP_N ? row + col * x.ld : col + row * x.ld;
      out[size_t(o * depth + p)] = typename Math::T(round_input(load(base, x.type, index), rounding));
    }
  return out;
}

// One batch: C = alpha op(A) op(B) + beta C, summing over k in order.
template <typename Math>
void multiply_batch(const Gemm& g, const Plan& plan, int64_t batch, double alpha, double beta) {
  using T = typename Math::T;
  const void* a = offset_bytes(g.a.data, batch * g.a.stride, g.a.type);
  const void* b = offset_bytes(g.b.data, batch * g.b.stride, g.b.type);
  void* c = const_cast<char*>(offset_bytes(g.c.data, batch * g.c.stride, g.c.type));
  const std::vector<T> a_rows = gather<Math>(a, g.a, g.transa, g.m, g.k, true, plan.rounding);
  const std::vector<T> b_cols = gather<Math>(b, g.b, g.transb, g.n, g.k, false, plan.rounding);
  const T alpha_t = Math::round(T(alpha)), beta_t = Math::round(T(beta));
  for (int64_t j = 0; j < g.n; ++j)
    for (int64_t i = 0; i < g.m; ++i) {
      T sum = 0;
      const T* ai = a_rows.data() + i * g.k;
      const T* bj = b_cols.data() + j * g.k;
      for (int64_t p = 0; p < g.k; ++p) sum = Math::round(sum + ai[p] * bj[p]);
      T result = Math::round(alpha_t * sum);
      const int64_t at = i + j * g.c.ld;
      if (beta != 0) result = Math::round(result + Math::round(beta_t * T(load(c, g.c.type, at))));
      store<Math>(c, g.c.type, at, result);
    }
}

}  // namespace

void multiply(const Gemm& g, const Plan& plan, double alpha, double beta) {
  for (int64_t batch = 0; batch < g.batch; ++batch) {
    switch (plan.accumulate) {
      case Accumulate::f16: multiply_batch<F16>(g, plan, batch, alpha, beta); break;
      case Accumulate::f32: multiply_batch<F32>(g, plan, batch, alpha, beta); break;
      case Accumulate::f64: multiply_batch<F64>(g, plan, batch, alpha, beta); break;
    }
  }
}

}  // namespace brigade::emu
