// CPU reference: strided copy with dtype conversion, and fill.
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/strided.h"

namespace brigade::cpu {

void copy(const Tensor& dst, const Tensor& src) {
  visit_dtype(dst.dtype(), [&](auto dtag) {
    using D = decltype(dtag);
    visit_dtype(src.dtype(), [&](auto stag) {
      using S = decltype(stag);
      for_each_row(dst.shape(), {&dst, &src}, [](const std::vector<char*>& p, const std::vector<int64_t>& st, int64_t n) {
        D* out = reinterpret_cast<D*>(p[0]);
        const S* in = reinterpret_cast<const S*>(p[1]);
        for (int64_t i = 0; i < n; ++i) {
          if constexpr (std::is_same_v<D, S>) out[i * st[0]] = in[i * st[1]];
          else out[i * st[0]] = from_double<D>(to_double(in[i * st[1]]));
        }
      });
    });
  });
}

void fill(const Tensor& dst, double value) {
  visit_dtype(dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T v = from_double<T>(value);
    for_each_row(dst.shape(), {&dst}, [v](const std::vector<char*>& p, const std::vector<int64_t>& st, int64_t n) {
      T* out = reinterpret_cast<T*>(p[0]);
      for (int64_t i = 0; i < n; ++i) out[i * st[0]] = v;
    });
  });
}

}  // namespace brigade::cpu
