// AVX2 + FMA loops for the exponential activations (see elementwise_avx2.h).
//
// The standard headers come first, compiled for baseline x86-64 like the rest of the library. The
// pragma then compiles everything after it — Vec8, exp, and the activation templates included after
// it (in an anonymous namespace, so these copies stay in this file) — for AVX2 + FMA. Only the
// functions below that available() guards ever run that code.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/elementwise_avx2.h"

// (GCC only: clang ignores `#pragma GCC target`, so a clang build takes the scalar path.)
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define BRIGADE_HAVE_AVX2_PATH 1
#include <immintrin.h>
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif

namespace brigade::cpu {

#if BRIGADE_HAVE_AVX2_PATH
namespace {

// Eight floats, with the arithmetic the activation templates use.
struct Vec8 {
  __m256 v;
  Vec8() = default;
  Vec8(__m256 x) : v(x) {}
  explicit Vec8(double x) : v(_mm256_set1_ps(float(x))) {}
  explicit Vec8(int x) : v(_mm256_set1_ps(float(x))) {}
};
inline Vec8 operator+(Vec8 a, Vec8 b) { return _mm256_add_ps(a.v, b.v); }
inline Vec8 operator-(Vec8 a, Vec8 b) { return _mm256_sub_ps(a.v, b.v); }
inline Vec8 operator*(Vec8 a, Vec8 b) { return _mm256_mul_ps(a.v, b.v); }
inline Vec8 operator/(Vec8 a, Vec8 b) { return _mm256_div_ps(a.v, b.v); }
inline Vec8 operator-(Vec8 a) { return _mm256_xor_ps(a.v, _mm256_set1_ps(-0.0f)); }

// e^x = 2^n e^r with n = round(x / ln 2) and r = x - n ln 2 in [-ln2/2, ln2/2]. ln 2 is split into
// a part exact in float and a small correction, so r keeps its low bits (Cody and Waite's
// reduction); e^r is a degree-6 polynomial (Taylor coefficients, the last two adjusted to minimise
// the error over the interval, as in Cephes's expf); 2^n is built in the exponent bits.
// Below -87.34 the result is 0 (exp(-inf) = 0, which softmax masks rely on), above 88.72 it is +inf,
// and NaN stays NaN (min/max are ordered so that a NaN operand is what they return).
inline Vec8 exp(Vec8 x) {
  const __m256 lo = _mm256_set1_ps(-87.33654f), hi = _mm256_set1_ps(88.72283f);
  const __m256 underflow = _mm256_cmp_ps(x.v, lo, _CMP_LT_OQ), overflow = _mm256_cmp_ps(x.v, hi, _CMP_GT_OQ);
  __m256 t = _mm256_max_ps(lo, _mm256_min_ps(hi, x.v));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(t, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  t = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), t);
  t = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), t);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(t, t), _mm256_add_ps(t, _mm256_set1_ps(1.0f)));
  // n is in [-126, 128]; 2^n is applied as 2^(n/2) * 2^(n - n/2), two factors that are normal
  // floats for every such n (2^128 itself is not a float).
  const __m256i n_int = _mm256_cvtps_epi32(n);
  const __m256i half_exponent = _mm256_slli_epi32(_mm256_add_epi32(_mm256_srai_epi32(n_int, 1), _mm256_set1_epi32(127)), 23);
  const __m256i rest_exponent =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(n_int, _mm256_srai_epi32(n_int, 1)), _mm256_set1_epi32(127)), 23);
  p = _mm256_mul_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(half_exponent)), _mm256_castsi256_ps(rest_exponent));
  p = _mm256_blendv_ps(p, _mm256_setzero_ps(), underflow);
  return _mm256_blendv_ps(p, _mm256_set1_ps(INFINITY), overflow);
}

}  // namespace
#endif

}  // namespace brigade::cpu

#if BRIGADE_HAVE_AVX2_PATH
#include "kernels/cpu/activation_math.h"
#endif

namespace brigade::cpu::avx2 {

#if BRIGADE_HAVE_AVX2_PATH
namespace {

// Applies f to n floats eight at a time; the last partial group goes through a padded copy so that
// every element, wherever it sits, is computed by the same instructions.
template <class F>
void map1(float* out, const float* x, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, f(Vec8(_mm256_loadu_ps(x + i))).v);
  if (i < n) {
    float in[8] = {}, result[8];
    std::memcpy(in, x + i, size_t(n - i) * sizeof(float));
    _mm256_storeu_ps(result, f(Vec8(_mm256_loadu_ps(in))).v);
    std::memcpy(out + i, result, size_t(n - i) * sizeof(float));
  }
}

template <class F>
void map2(float* out, const float* a, const float* b, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, f(Vec8(_mm256_loadu_ps(a + i)), Vec8(_mm256_loadu_ps(b + i))).v);
  if (i < n) {
    float in_a[8] = {}, in_b[8] = {}, result[8];
    std::memcpy(in_a, a + i, size_t(n - i) * sizeof(float));
    std::memcpy(in_b, b + i, size_t(n - i) * sizeof(float));
    _mm256_storeu_ps(result, f(Vec8(_mm256_loadu_ps(in_a)), Vec8(_mm256_loadu_ps(in_b))).v);
    std::memcpy(out + i, result, size_t(n - i) * sizeof(float));
  }
}

}  // namespace

bool unary_f32(ops::UnaryOp op, float* out, const float* x, int64_t n) {
  switch (op) {
    case ops::UnaryOp::exp: map1(out, x, n, [](Vec8 v) { return exp(v); }); return true;
    case ops::UnaryOp::sigmoid: map1(out, x, n, [](Vec8 v) { return sigmoid(v); }); return true;
    case ops::UnaryOp::silu: map1(out, x, n, [](Vec8 v) { return silu(v); }); return true;
    case ops::UnaryOp::gelu: map1(out, x, n, [](Vec8 v) { return gelu(v); }); return true;
    default: return false;
  }
}

bool unary_backward_f32(ops::UnaryOp op, float* grad_x, const float* grad_y, const float* x, int64_t n) {
  switch (op) {
    case ops::UnaryOp::gelu: map2(grad_x, grad_y, x, n, [](Vec8 g, Vec8 v) { return g * gelu_derivative(v); }); return true;
    case ops::UnaryOp::silu: map2(grad_x, grad_y, x, n, [](Vec8 g, Vec8 v) { return g * silu_derivative(v); }); return true;
    default: return false;
  }
}
#endif

}  // namespace brigade::cpu::avx2

#if BRIGADE_HAVE_AVX2_PATH
#pragma GCC pop_options
#endif

namespace brigade::cpu::avx2 {
bool has_vector_form(ops::UnaryOp op) {
  // The ops unary_f32's switch handles; a new case there belongs here too (tested together).
  return op == ops::UnaryOp::exp || op == ops::UnaryOp::sigmoid || op == ops::UnaryOp::silu ||
         op == ops::UnaryOp::gelu;
}
}  // namespace brigade::cpu::avx2

#if BRIGADE_HAVE_AVX2_PATH
namespace brigade::cpu::avx2 {
bool available() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}
}  // namespace brigade::cpu::avx2
#else
namespace brigade::cpu::avx2 {
bool available() { return false; }
bool unary_f32(ops::UnaryOp, float*, const float*, int64_t) { return false; }
bool unary_backward_f32(ops::UnaryOp, float*, const float*, const float*, int64_t) { return false; }
}  // namespace brigade::cpu::avx2
#endif
