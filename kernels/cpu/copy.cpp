// CPU reference: strided copy with dtype conversion, and fill.
#include <cmath>
#include <type_traits>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/strided.h"

namespace brigade::cpu {
namespace {

// Converts one element. Going through double is exact for every pair of dtypes brigade has (double
// holds every f32, bf16, f16 and i32 value exactly, and i64 up to 2^53), so the only rounding is
// the final narrowing.
template <class D, class S>
D convert(S v) {
  if constexpr (std::is_same_v<D, S>) return v;
  else return from_double<D>(to_double(v));  // one rounding, also double -> bf16/f16
}

}  // namespace

void copy(const Tensor& dst, const Tensor& src) {
  visit_dtype(dst.dtype(), [&](auto dtag) {
    using D = decltype(dtag);
    visit_dtype(src.dtype(), [&](auto stag) {
      using S = decltype(stag);
      for_each_row(dst.shape(), {&dst, &src}, [](const std::vector<char*>& p, const std::vector<int64_t>& st, int64_t n) {
        D* out = reinterpret_cast<D*>(p[0]);
        const S* in = reinterpret_cast<const S*>(p[1]);
        if (st[0] == 1 && st[1] == 1) {
          for (int64_t i = 0; i < n; ++i) out[i] = convert<D>(in[i]);
        } else {
          const int64_t so = st[0], si = st[1];
          for (int64_t i = 0; i < n; ++i) out[i * so] = convert<D>(in[i * si]);
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
