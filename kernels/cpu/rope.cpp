// CPU reference: rotary position embedding, one (b, h, t) row at a time, each pair (i, i + D/2)
// turned by the table's angle for row t.
#include "core/parallel.h"
#include "kernels/cpu/kernels.h"

namespace brigade::cpu {

void rope(const Tensor& y, const Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse) {
  visit_float(x.dtype(), "rope", [&](auto tag) {
    using T = decltype(tag);
    const int64_t B = x.size(0), H = x.size(1), T_ = x.size(2), D = x.size(3), half = D / 2;
    const T* in = x.data<T>();
    const T* c = cos.data<T>();
    const T* s = sin.data<T>();
    T* out = y.data<T>();
    const T sign = inverse ? T(-1) : T(1);
    parallel_for(B * H * T_, 64, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t t = row % T_, h = row / T_ % H, b = row / T_ / H;
        const T* xr = in + b * x.stride(0) + h * x.stride(1) + t * x.stride(2);
        T* yr = out + row * D;
        for (int64_t i = 0; i < half; ++i) {
          const T a = xr[i * x.stride(3)], a2 = xr[(i + half) * x.stride(3)];
          const T ci = c[t * half + i], si = sign * s[t * half + i];
          yr[i] = a * ci - a2 * si;
          yr[i + half] = a2 * ci + a * si;
        }
      }
    });
  });
}

}  // namespace brigade::cpu
