// CPU reference: softmax and log-softmax, forward and backward, one line along `dim` at a time,
// each line summed in double, so the result does not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <utility>

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

// for_each_line over `out` and `inputs`, all of out's float dtype: line(out, inputs..., steps, n)
// gets each line's typed start pointers, steps[0] being out's stride and steps[1 + k] the k-th input's.
template <class LineFn, class... Inputs>
void for_each_float_line(const char* op, int64_t dim, LineFn&& line, const Tensor& out, const Inputs&... inputs) {
  visit_float(out.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    [&]<size_t... I>(std::index_sequence<I...>) {
      for_each_line(out.shape(), dim, {&out, &inputs...}, [&](const Ptrs& p, const Steps& st, int64_t n) {
        line(reinterpret_cast<T*>(p[0]), reinterpret_cast<const T*>(p[I + 1])..., st, n);
      });
    }(std::index_sequence_for<Inputs...>{});
  });
}

}  // namespace

void softmax(const Tensor& y, const Tensor& x, int64_t dim) {
  for_each_float_line("softmax", dim, [](auto* out, const auto* in, const Steps& st, int64_t n) {
    using T = std::remove_pointer_t<decltype(out)>;
    const T m = line_max(in, n, st[1]);
    double total = 0;
    for (int64_t i = 0; i < n; ++i) {
      const T e = std::exp(in[i * st[1]] - m);
      out[i * st[0]] = e;
      total += e;
    }
    const T inv = T(1.0 / total);
    for (int64_t i = 0; i < n; ++i) out[i * st[0]] *= inv;
  }, y, x);
}

void log_softmax(const Tensor& y, const Tensor& x, int64_t dim) {
  for_each_float_line("log_softmax", dim, [](auto* out, const auto* in, const Steps& st, int64_t n) {
    using T = std::remove_pointer_t<decltype(out)>;
    const T m = line_max(in, n, st[1]);
    double total = 0;
    for (int64_t i = 0; i < n; ++i) total += std::exp(in[i * st[1]] - m);
    const T log_total = T(std::log(total));
    for (int64_t i = 0; i < n; ++i) out[i * st[0]] = (in[i * st[1]] - m) - log_total;
  }, y, x);
}

void softmax_backward(const Tensor& grad_x, const Tensor& grad_y, const Tensor& y, int64_t dim) {
  for_each_float_line("softmax_backward", dim, [](auto* gx, const auto* gy, const auto* yv, const Steps& st, int64_t n) {
    using T = std::remove_pointer_t<decltype(gx)>;
    double dot = 0;
    for (int64_t i = 0; i < n; ++i) dot += double(gy[i * st[1]]) * double(yv[i * st[2]]);
    for (int64_t i = 0; i < n; ++i) gx[i * st[0]] = yv[i * st[2]] * (gy[i * st[1]] - T(dot));
  }, grad_x, grad_y, y);
}

void log_softmax_backward(const Tensor& grad_x, const Tensor& grad_y, const Tensor& y, int64_t dim) {
  for_each_float_line("log_softmax_backward", dim,
                      [](auto* gx, const auto* gy, const auto* yv, const Steps& st, int64_t n) {
    using T = std::remove_pointer_t<decltype(gx)>;
    double total = 0;
    for (int64_t i = 0; i < n; ++i) total += gy[i * st[1]];
    for (int64_t i = 0; i < n; ++i) gx[i * st[0]] = gy[i * st[1]] - std::exp(yv[i * st[2]]) * T(total);
  }, grad_x, grad_y, y);
}

}  // namespace brigade::cpu
