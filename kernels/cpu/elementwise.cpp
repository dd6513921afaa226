// CPU reference: elementwise ops. Each op's math is one small function of scalars; the loops around
// them are shared (map1/map2/map3 below). Computes in T (f32 or f64); the op layer widens bf16/f16
// to f32 first.
//
// The op is chosen by a switch *outside* the loop, so each inner loop is a plain `o[i] = x[i] + y[i]`
// that the compiler vectorises; a switch inside the loop would run once per element.
#include <cmath>

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

// ---- the scalar math ----

constexpr double kSqrt2OverPi = 0.7978845608028654;  // sqrt(2 / pi), GELU's tanh approximation
constexpr double kGeluCubic = 0.044715;

template <class T> T sigmoid(T x) { return T(1) / (T(1) + std::exp(-x)); }

// GELU, tanh approximation: 0.5 x (1 + tanh(u)) with u = sqrt(2/pi) (x + 0.044715 x^3).
// Since 0.5 (1 + tanh(u)) = sigmoid(2u), this is x / (1 + exp(-2u)): one exp instead of a tanh
// (several times faster), and no cancellation in 1 + tanh(u) for negative x.
template <class T> T gelu_inner(T x) { return T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x); }
template <class T> T gelu(T x) { return x / (T(1) + std::exp(T(-2) * gelu_inner(x))); }

// d gelu / dx = s + x s (1 - s) 2 du/dx, with s = sigmoid(2u) and du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2).
template <class T> T gelu_derivative(T x) {
  const T s = sigmoid(T(2) * gelu_inner(x));
  const T du = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluCubic) * x * x);
  return s + x * s * (T(1) - s) * T(2) * du;
}

// silu(x) = x sigmoid(x); its derivative is s (1 + x (1 - s)).
template <class T> T silu_derivative(T x) {
  const T s = sigmoid(x);
  return s * (T(1) + x * (T(1) - s));
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

template <class T>
void unary_typed(ops::UnaryOp op, const Tensor& out, const Tensor& in) {
  switch (op) {
    case ops::UnaryOp::neg: return map1<T>(out, in, [](T x) { return -x; });
    case ops::UnaryOp::exp: return map1<T>(out, in, [](T x) { return std::exp(x); });
    case ops::UnaryOp::log: return map1<T>(out, in, [](T x) { return std::log(x); });
    case ops::UnaryOp::sqrt: return map1<T>(out, in, [](T x) { return std::sqrt(x); });
    case ops::UnaryOp::rsqrt: return map1<T>(out, in, [](T x) { return T(1) / std::sqrt(x); });
    case ops::UnaryOp::tanh: return map1<T>(out, in, [](T x) { return std::tanh(x); });
    case ops::UnaryOp::relu: return map1<T>(out, in, [](T x) { return x > T(0) ? x : T(0); });
    case ops::UnaryOp::gelu: return map1<T>(out, in, [](T x) { return gelu(x); });
    case ops::UnaryOp::silu: return map1<T>(out, in, [](T x) { return x * sigmoid(x); });
    case ops::UnaryOp::sigmoid: return map1<T>(out, in, [](T x) { return sigmoid(x); });
  }
}

// grad_x = grad_y * dy/dx, where dy/dx is written with whichever of x and y = op(x) is cheaper.
template <class T>
void unary_backward_typed(ops::UnaryOp op, const Tensor& gx, const Tensor& gy, const Tensor& x, const Tensor& y) {
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
