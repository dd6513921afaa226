// CPU reference: dropout with a counter-based mask. Element i's fate depends only on
// (seed, offset + i), so any thread — or a GPU thread later — can decide it independently.
#include "core/parallel.h"
#include "core/rng.h"
#include "kernels/cpu/kernels.h"

namespace brigade::cpu {

void dropout(const Tensor& out, const Tensor& x, double p, uint64_t seed, uint64_t offset) {
  visit_float(x.dtype(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    T* o = out.data<T>();
    const T keep_scale = T(1.0 / (1.0 - p));
    parallel_for(x.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        o[i] = philox_uniform(seed, offset + uint64_t(i)) < p ? T(0) : in[i] * keep_scale;
    });
  });
}

}  // namespace brigade::cpu
