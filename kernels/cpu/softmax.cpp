// CPU reference: softmax and log-softmax, forward and backward, one line along `dim` at a time,
// each line summed in double, so the result does not depend on the thread count.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/strided.h"

namespace brigade::cpu {
namespace {

using Ptrs = std::vector<char*>;
using Steps = std::vector<int64_t>;

// The largest of n values at stride s. Softmax is unchanged by subtracting any constant from a
// line; subtracting the maximum makes every exponent <= 0, so exp never overflows.
template <class T>
T line_max(const T* x, int64_t n, int64_t s) {
  T m = x[0];
  for (int64_t i = 1; i < n; ++i) m = std::max(m, x[i * s]);
  return m;
}

}  // namespace

void softmax(const Tensor& y, const Tensor& x, int64_t dim) {
  visit_float(y.dtype(), "softmax", [&](auto tag) {
    using T = decltype(tag);
    for_each_line(y.shape(), dim, {&y, &x}, [](const Ptrs& p, const Steps& st, int64_t n) {
      T* out = reinterpret_cast<T*>(p[0]);
      const T* in = reinterpret_cast<const T*>(p[1]);
      const int64_t so = st[0], si = st[1];
      const T m = line_max(in, n, si);
      double total = 0;
      for (int64_t i = 0; i < n; ++i) {
        const T e = std::exp(in[i * si] - m);
        out[i * so] = e;
        total += e;
      }
      const T inv = T(1.0 / total);
      for (int64_t i = 0; i < n; ++i) out[i * so] *= inv;
    });
  });
}

void log_softmax(const Tensor& y, const Tensor& x, int64_t dim) {
  visit_float(y.dtype(), "log_softmax", [&](auto tag) {
    using T = decltype(tag);
    for_each_line(y.shape(), dim, {&y, &x}, [](const Ptrs& p, const Steps& st, int64_t n) {
      T* out = reinterpret_cast<T*>(p[0]);
      const T* in = reinterpret_cast<const T*>(p[1]);
      const int64_t so = st[0], si = st[1];
      const T m = line_max(in, n, si);
      double total = 0;
      for (int64_t i = 0; i < n; ++i) total += std::exp(in[i * si] - m);
      const T log_total = T(std::log(total));
      for (int64_t i = 0; i < n; ++i) out[i * so] = (in[i * si] - m) - log_total;
    });
  });
}

void softmax_backward(const Tensor& grad_x, const Tensor& grad_y, const Tensor& y, int64_t dim) {
  visit_float(grad_x.dtype(), "softmax_backward", [&](auto tag) {
    using T = decltype(tag);
    for_each_line(grad_x.shape(), dim, {&grad_x, &grad_y, &y}, [](const Ptrs& p, const Steps& st, int64_t n) {
      T* gx = reinterpret_cast<T*>(p[0]);
      const T* gy = reinterpret_cast<const T*>(p[1]);
      const T* yv = reinterpret_cast<const T*>(p[2]);
      double dot = 0;
      for (int64_t i = 0; i < n; ++i) dot += double(gy[i * st[1]]) * double(yv[i * st[2]]);
      for (int64_t i = 0; i < n; ++i) gx[i * st[0]] = yv[i * st[2]] * (gy[i * st[1]] - T(dot));
    });
  });
}

void log_softmax_backward(const Tensor& grad_x, const Tensor& grad_y, const Tensor& y, int64_t dim) {
  visit_float(grad_x.dtype(), "log_softmax_backward", [&](auto tag) {
    using T = decltype(tag);
    for_each_line(grad_x.shape(), dim, {&grad_x, &grad_y, &y}, [](const Ptrs& p, const Steps& st, int64_t n) {
      T* gx = reinterpret_cast<T*>(p[0]);
      const T* gy = reinterpret_cast<const T*>(p[1]);
      const T* yv = reinterpret_cast<const T*>(p[2]);
      double total = 0;
      for (int64_t i = 0; i < n; ++i) total += gy[i * st[1]];
      for (int64_t i = 0; i < n; ++i) gx[i * st[0]] = gy[i * st[1]] - std::exp(yv[i * st[2]]) * T(total);
    });
  });
}

}  // namespace brigade::cpu
