// CPU reference: elementwise ops. Each op's math is one small function of scalars; the loops around
// them are shared. Computes in T (f32 or f64); the op layer widens bf16/f16 to f32 first.
#include <cmath>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/strided.h"

namespace brigade::cpu {
namespace {

template <class T>
T apply(ops::BinaryOp op, T a, T b) {
  switch (op) {
    case ops::BinaryOp::add: return a + b;
    case ops::BinaryOp::sub: return a - b;
    case ops::BinaryOp::mul: return a * b;
    case ops::BinaryOp::div: return a / b;
  }
  return T(0);
}

constexpr double kSqrt2OverPi = 0.7978845608028654;  // sqrt(2 / pi), GELU's tanh approximation
constexpr double kGeluCubic = 0.044715;

template <class T>
T apply(ops::UnaryOp op, T x) {
  switch (op) {
    case ops::UnaryOp::neg: return -x;
    case ops::UnaryOp::exp: return std::exp(x);
    case ops::UnaryOp::log: return std::log(x);
    case ops::UnaryOp::sqrt: return std::sqrt(x);
    case ops::UnaryOp::rsqrt: return T(1) / std::sqrt(x);
    case ops::UnaryOp::tanh: return std::tanh(x);
    case ops::UnaryOp::relu: return x > T(0) ? x : T(0);
    case ops::UnaryOp::gelu: return T(0.5) * x * (T(1) + std::tanh(T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x)));
    case ops::UnaryOp::silu: return x / (T(1) + std::exp(-x));
    case ops::UnaryOp::sigmoid: return T(1) / (T(1) + std::exp(-x));
  }
  return T(0);
}

// dy/dx of each unary op, from x and y = op(x), times the incoming gradient g.
template <class T>
T apply_backward(ops::UnaryOp op, T g, T x, T y) {
  switch (op) {
    case ops::UnaryOp::neg: return -g;
    case ops::UnaryOp::exp: return g * y;
    case ops::UnaryOp::log: return g / x;
    case ops::UnaryOp::sqrt: return g * T(0.5) / y;
    case ops::UnaryOp::rsqrt: return g * T(-0.5) * y * y * y;
    case ops::UnaryOp::tanh: return g * (T(1) - y * y);
    case ops::UnaryOp::relu: return x > T(0) ? g : T(0);
    case ops::UnaryOp::gelu: {
      T inner = T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x);
      T t = std::tanh(inner);
      T dinner = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluCubic) * x * x);
      return g * (T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * dinner);
    }
    case ops::UnaryOp::silu: {
      T s = T(1) / (T(1) + std::exp(-x));
      return g * s * (T(1) + x * (T(1) - s));
    }
    case ops::UnaryOp::sigmoid: return g * y * (T(1) - y);
  }
  return T(0);
}

}  // namespace

void binary(ops::BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  visit_float(out.dtype(), "binary", [&](auto tag) {
    using T = decltype(tag);
    for_each_row(out.shape(), {&out, &a, &b}, [op](const std::vector<char*>& p, const std::vector<int64_t>& st, int64_t n) {
      T* o = reinterpret_cast<T*>(p[0]);
      const T* x = reinterpret_cast<const T*>(p[1]);
      const T* y = reinterpret_cast<const T*>(p[2]);
      for (int64_t i = 0; i < n; ++i) o[i * st[0]] = apply(op, x[i * st[1]], y[i * st[2]]);
    });
  });
}

void unary(ops::UnaryOp op, const Tensor& out, const Tensor& x) {
  visit_float(out.dtype(), "unary", [&](auto tag) {
    using T = decltype(tag);
    for_each_row(out.shape(), {&out, &x}, [op](const std::vector<char*>& p, const std::vector<int64_t>& st, int64_t n) {
      T* o = reinterpret_cast<T*>(p[0]);
      const T* in = reinterpret_cast<const T*>(p[1]);
      for (int64_t i = 0; i < n; ++i) o[i * st[0]] = apply(op, in[i * st[1]]);
    });
  });
}

void unary_backward(ops::UnaryOp op, const Tensor& grad_x, const Tensor& grad_y, const Tensor& x, const Tensor& y) {
  visit_float(grad_x.dtype(), "unary_backward", [&](auto tag) {
    using T = decltype(tag);
    for_each_row(grad_x.shape(), {&grad_x, &grad_y, &x, &y},
                 [op](const std::vector<char*>& p, const std::vector<int64_t>& st, int64_t n) {
                   T* gx = reinterpret_cast<T*>(p[0]);
                   const T* gy = reinterpret_cast<const T*>(p[1]);
                   const T* xv = reinterpret_cast<const T*>(p[2]);
                   const T* yv = reinterpret_cast<const T*>(p[3]);
                   for (int64_t i = 0; i < n; ++i)
                     gx[i * st[0]] = apply_backward(op, gy[i * st[1]], xv[i * st[2]], yv[i * st[3]]);
                 });
  });
}

void scale_shift(const Tensor& out, const Tensor& x, double scale, double shift) {
  visit_float(out.dtype(), "scale_shift", [&](auto tag) {
    using T = decltype(tag);
    const T s = T(scale), b = T(shift);
    for_each_row(out.shape(), {&out, &x}, [s, b](const std::vector<char*>& p, const std::vector<int64_t>& st, int64_t n) {
      T* o = reinterpret_cast<T*>(p[0]);
      const T* in = reinterpret_cast<const T*>(p[1]);
      for (int64_t i = 0; i < n; ++i) o[i * st[0]] = in[i * st[1]] * s + b;
    });
  });
}

void pow_scalar(const Tensor& out, const Tensor& x, double exponent) {
  visit_float(out.dtype(), "pow", [&](auto tag) {
    using T = decltype(tag);
    const T e = T(exponent);
    for_each_row(out.shape(), {&out, &x}, [e](const std::vector<char*>& p, const std::vector<int64_t>& st, int64_t n) {
      T* o = reinterpret_cast<T*>(p[0]);
      const T* in = reinterpret_cast<const T*>(p[1]);
      for (int64_t i = 0; i < n; ++i) o[i * st[0]] = std::pow(in[i * st[1]], e);
    });
  });
}

void pow_scalar_backward(const Tensor& grad_x, const Tensor& grad_y, const Tensor& x, double exponent) {
  visit_float(grad_x.dtype(), "pow_backward", [&](auto tag) {
    using T = decltype(tag);
    const T e = T(exponent);
    for_each_row(grad_x.shape(), {&grad_x, &grad_y, &x},
                 [e](const std::vector<char*>& p, const std::vector<int64_t>& st, int64_t n) {
                   T* gx = reinterpret_cast<T*>(p[0]);
                   const T* gy = reinterpret_cast<const T*>(p[1]);
                   const T* xv = reinterpret_cast<const T*>(p[2]);
                   for (int64_t i = 0; i < n; ++i) gx[i * st[0]] = gy[i * st[1]] * e * std::pow(xv[i * st[2]], e - T(1));
                 });
  });
}

void add_inplace(const Tensor& dst, const Tensor& src, double alpha) {
  visit_float(dst.dtype(), "add_", [&](auto tag) {
    using T = decltype(tag);
    const T a = T(alpha);
    for_each_row(dst.shape(), {&dst, &src}, [a](const std::vector<char*>& p, const std::vector<int64_t>& st, int64_t n) {
      T* d = reinterpret_cast<T*>(p[0]);
      const T* s = reinterpret_cast<const T*>(p[1]);
      for (int64_t i = 0; i < n; ++i) d[i * st[0]] += a * s[i * st[1]];
    });
  });
}

void masked_fill(const Tensor& out, const Tensor& x, const Tensor& mask, double value) {
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    visit_dtype(mask.dtype(), [&](auto mtag) {
      using M = decltype(mtag);
      const T v = from_double<T>(value);
      for_each_row(out.shape(), {&out, &x, &mask}, [v](const std::vector<char*>& p, const std::vector<int64_t>& st, int64_t n) {
        T* o = reinterpret_cast<T*>(p[0]);
        const T* in = reinterpret_cast<const T*>(p[1]);
        const M* m = reinterpret_cast<const M*>(p[2]);
        for (int64_t i = 0; i < n; ++i) o[i * st[0]] = to_double(m[i * st[2]]) != 0.0 ? v : in[i * st[1]];
      });
    });
  });
}

}  // namespace brigade::cpu
