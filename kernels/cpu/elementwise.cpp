// CPU reference: elementwise ops. Each op's math is one small function of scalars; the loops around
// them are shared (map1/map2/map3 below). Computes in T (f32 or f64); the op layer widens bf16/f16
// to f32 first.
//
// The op is chosen by a switch *outside* the loop, so each inner loop is a plain `o[i] = x[i] + y[i]`
// that the compiler vectorises; a switch inside the loop would run once per element.
#include <cmath>
#include <type_traits>

#include "kernels/cpu/activation_math.h"
#include "kernels/cpu/elementwise_avx2.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/strided.h"

namespace brigade::cpu {
namespace {

using Ptrs = std::vector<char*>;
using Steps = std::vector<int64_t>;

// out = f(x), elementwise. The unit-stride branch is the common (contiguous) case.
template <class T, class F>
void map1(const Tensor& out, const Tensor& x, F f) {
  for_each_row(out.shape(), {&out, &x}, [f](const Ptrs& p, const Steps& st, int64_t n) {
    T* o = reinterpret_cast<T*>(p[0]);
    const T* a = reinterpret_cast<const T*>(p[1]);
    if (st[0] == 1 && st[1] == 1) {
      for (int64_t i = 0; i < n; ++i) o[i] = f(a[i]);
    } else {
      const int64_t so = st[0], sa = st[1];
      for (int64_t i = 0; i < n; ++i) o[i * so] = f(a[i * sa]);
    }
  });
}

// out = f(x, y). Besides unit strides, a broadcast scalar y (stride 0) gets its own loop.
template <class T, class F>
void map2(const Tensor& out, const Tensor& x, const Tensor& y, F f) {
  for_each_row(out.shape(), {&out, &x, &y}, [f](const Ptrs& p, const Steps& st, int64_t n) {
    T* o = reinterpret_cast<T*>(p[0]);
    const T* a = reinterpret_cast<const T*>(p[1]);
    const T* b = reinterpret_cast<const T*>(p[2]);
    if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
      for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], b[i]);
    } else if (st[0] == 1 && st[1] == 1 && st[2] == 0) {
      const T bv = b[0];
      for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], bv);
    } else {
      const int64_t so = st[0], sa = st[1], sb = st[2];
      for (int64_t i = 0; i < n; ++i) o[i * so] = f(a[i * sa], b[i * sb]);
    }
  });
}

// out = f(x, y, z).
template <class T, class F>
void map3(const Tensor& out, const Tensor& x, const Tensor& y, const Tensor& z, F f) {
  for_each_row(out.shape(), {&out, &x, &y, &z}, [f](const Ptrs& p, const Steps& st, int64_t n) {
    T* o = reinterpret_cast<T*>(p[0]);
    const T* a = reinterpret_cast<const T*>(p[1]);
    const T* b = reinterpret_cast<const T*>(p[2]);
    const T* c = reinterpret_cast<const T*>(p[3]);
    if (st[0] == 1 && st[1] == 1 && st[2] == 1 && st[3] == 1) {
      for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], b[i], c[i]);
    } else {
      const int64_t so = st[0], sa = st[1], sb = st[2], sc = st[3];
      for (int64_t i = 0; i < n; ++i) o[i * so] = f(a[i * sa], b[i * sb], c[i * sc]);
    }
  });
}

template <class T>
void binary_typed(ops::BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  switch (op) {
    case ops::BinaryOp::add: return map2<T>(out, a, b, [](T x, T y) { return x + y; });
    case ops::BinaryOp::sub: return map2<T>(out, a, b, [](T x, T y) { return x - y; });
    case ops::BinaryOp::mul: return map2<T>(out, a, b, [](T x, T y) { return x * y; });
    case ops::BinaryOp::div: return map2<T>(out, a, b, [](T x, T y) { return x / y; });
  }
}

// The exponential activations on contiguous f32 run eight at a time where the CPU has AVX2
// (elementwise_avx2.h). Returns whether it did.
constexpr int64_t kVectorChunk = 1 << 14;  // elements per parallel_for chunk

bool unary_vectorized(ops::UnaryOp op, const Tensor& out, const Tensor& in) {
  if (!avx2::available() || out.dtype() != DType::f32 || !out.is_contiguous() || !in.is_contiguous()) return false;
  if (!avx2::has_vector_form(op)) return false;
  float* o = out.data<float>();
  const float* x = in.data<float>();
  parallel_for(out.numel(), kVectorChunk, [&](int64_t begin, int64_t end) {
    avx2::unary_f32(op, o + begin, x + begin, end - begin);
  });
  return true;
}

bool unary_backward_vectorized(ops::UnaryOp op, const Tensor& gx, const Tensor& gy, const Tensor& x) {
  if (!avx2::available() || gx.dtype() != DType::f32 || !gx.is_contiguous() || !gy.is_contiguous() ||
      !x.is_contiguous() || gy.dtype() != DType::f32 || x.dtype() != DType::f32)
    return false;
  if (!avx2::unary_backward_f32(op, nullptr, nullptr, nullptr, 0)) return false;
  float* g = gx.data<float>();
  const float *dy = gy.data<float>(), *v = x.data<float>();
  parallel_for(gx.numel(), kVectorChunk, [&](int64_t begin, int64_t end) {
    avx2::unary_backward_f32(op, g + begin, dy + begin, v + begin, end - begin);
  });
  return true;
}

template <class T>
void unary_typed(ops::UnaryOp op, const Tensor& out, const Tensor& in) {
  if (std::is_same_v<T, float> && unary_vectorized(op, out, in)) return;
  switch (op) {
    case ops::UnaryOp::neg: return map1<T>(out, in, [](T x) { return -x; });
    case ops::UnaryOp::exp: return map1<T>(out, in, [](T x) { return std::exp(x); });
    case ops::UnaryOp::log: return map1<T>(out, in, [](T x) { return std::log(x); });
    case ops::UnaryOp::sqrt: return map1<T>(out, in, [](T x) { return std::sqrt(x); });
    case ops::UnaryOp::rsqrt: return map1<T>(out, in, [](T x) { return T(1) / std::sqrt(x); });
    case ops::UnaryOp::tanh: return map1<T>(out, in, [](T x) { return std::tanh(x); });
    case ops::UnaryOp::relu: return map1<T>(out, in, [](T x) { return x > T(0) ? x : T(0); });
    case ops::UnaryOp::gelu: return map1<T>(out, in, [](T x) { return gelu(x); });
    case ops::UnaryOp::silu: return map1<T>(out, in, [](T x) { return silu(x); });
    case ops::UnaryOp::sigmoid: return map1<T>(out, in, [](T x) { return sigmoid(x); });
  }
}

// grad_x = grad_y * dy/dx, where dy/dx is written with whichever of x and y = op(x) is cheaper.
template <class T>
void unary_backward_typed(ops::UnaryOp op, const Tensor& gx, const Tensor& gy, const Tensor& x, const Tensor& y) {
  if (std::is_same_v<T, float> && unary_backward_vectorized(op, gx, gy, x)) return;
  switch (op) {
    case ops::UnaryOp::neg: return map3<T>(gx, gy, x, y, [](T g, T, T) { return -g; });
    case ops::UnaryOp::exp: return map3<T>(gx, gy, x, y, [](T g, T, T v) { return g * v; });
    case ops::UnaryOp::log: return map3<T>(gx, gy, x, y, [](T g, T u, T) { return g / u; });
    case ops::UnaryOp::sqrt: return map3<T>(gx, gy, x, y, [](T g, T, T v) { return g * T(0.5) / v; });
    case ops::UnaryOp::rsqrt: return map3<T>(gx, gy, x, y, [](T g, T, T v) { return g * T(-0.5) * v * v * v; });
    case ops::UnaryOp::tanh: return map3<T>(gx, gy, x, y, [](T g, T, T v) { return g * (T(1) - v * v); });
    case ops::UnaryOp::relu: return map3<T>(gx, gy, x, y, [](T g, T u, T) { return u > T(0) ? g : T(0); });
    case ops::UnaryOp::gelu: return map3<T>(gx, gy, x, y, [](T g, T u, T) { return g * gelu_derivative(u); });
    case ops::UnaryOp::silu: return map3<T>(gx, gy, x, y, [](T g, T u, T) { return g * silu_derivative(u); });
    case ops::UnaryOp::sigmoid: return map3<T>(gx, gy, x, y, [](T g, T, T v) { return g * v * (T(1) - v); });
  }
}

}  // namespace

void binary(ops::BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  visit_float(out.dtype(), "binary", [&](auto tag) { binary_typed<decltype(tag)>(op, out, a, b); });
}

void unary(ops::UnaryOp op, const Tensor& out, const Tensor& x) {
  visit_float(out.dtype(), "unary", [&](auto tag) { unary_typed<decltype(tag)>(op, out, x); });
}

void unary_backward(ops::UnaryOp op, const Tensor& grad_x, const Tensor& grad_y, const Tensor& x, const Tensor& y) {
  visit_float(grad_x.dtype(), "unary_backward",
              [&](auto tag) { unary_backward_typed<decltype(tag)>(op, grad_x, grad_y, x, y); });
}

void scale_shift(const Tensor& out, const Tensor& x, double scale, double shift) {
  visit_float(out.dtype(), "scale_shift", [&](auto tag) {
    using T = decltype(tag);
    const T s = T(scale), b = T(shift);
    map1<T>(out, x, [s, b](T v) { return v * s + b; });
  });
}

void pow_scalar(const Tensor& out, const Tensor& x, double exponent) {
  visit_float(out.dtype(), "pow", [&](auto tag) {
    using T = decltype(tag);
    const T e = T(exponent);
    map1<T>(out, x, [e](T v) { return std::pow(v, e); });
  });
}

void pow_scalar_backward(const Tensor& grad_x, const Tensor& grad_y, const Tensor& x, double exponent) {
  visit_float(grad_x.dtype(), "pow_backward", [&](auto tag) {
    using T = decltype(tag);
    const T e = T(exponent);
    // x^0 is constant: its gradient is 0 everywhere, also at x = 0 where e * x^(e-1) would be 0 * inf.
    if (exponent == 0) return map2<T>(grad_x, grad_y, x, [](T, T) { return T(0); });
    map2<T>(grad_x, grad_y, x, [e](T g, T v) { return g * e * std::pow(v, e - T(1)); });
  });
}

void add_inplace(const Tensor& dst, const Tensor& src, double alpha) {
  // dst is both the output and an input: each element reads itself and then writes itself.
  visit_float(dst.dtype(), "add_", [&](auto tag) {
    using T = decltype(tag);
    const T a = T(alpha);
    map2<T>(dst, dst, src, [a](T d, T s) { return d + a * s; });
  });
}

void masked_fill(const Tensor& out, const Tensor& x, const Tensor& mask, double value) {
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    visit_dtype(mask.dtype(), [&](auto mtag) {
      using M = decltype(mtag);
      const T v = from_double<T>(value);
      for_each_row(out.shape(), {&out, &x, &mask}, [v](const Ptrs& p, const Steps& st, int64_t n) {
        T* o = reinterpret_cast<T*>(p[0]);
        const T* in = reinterpret_cast<const T*>(p[1]);
        const M* m = reinterpret_cast<const M*>(p[2]);
        for (int64_t i = 0; i < n; ++i) o[i * st[0]] = to_double(m[i * st[2]]) != 0.0 ? v : in[i * st[1]];
      });
    });
  });
}

}  // namespace brigade::cpu
