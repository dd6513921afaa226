// CPU reference: SwiGLU's gate, silu(gate) * up, and its backward, with activation_math.h's silu.
#include "core/parallel.h"
#include "kernels/cpu/activation_math.h"
#include "kernels/cpu/kernels.h"

namespace brigade::cpu {

void swiglu(const Tensor& y, const Tensor& gate, const Tensor& up) {
  visit_float(gate.dtype(), "swiglu", [&](auto tag) {
    using T = decltype(tag);
    const T* g = gate.data<T>();
    const T* u = up.data<T>();
    T* out = y.data<T>();
    parallel_for(gate.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) out[i] = silu(g[i]) * u[i];
    });
  });
}

void swiglu_backward(const Tensor& grad_gate, const Tensor& grad_up, const Tensor& grad_y, const Tensor& gate,
                     const Tensor& up) {
  visit_float(gate.dtype(), "swiglu_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* gy = grad_y.data<T>();
    const T* g = gate.data<T>();
    const T* u = up.data<T>();
    T* gg = grad_gate.data<T>();
    T* gu = grad_up.data<T>();
    parallel_for(gate.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        gg[i] = gy[i] * u[i] * silu_derivative(g[i]);
        gu[i] = gy[i] * silu(g[i]);
      }
    });
  });
}

}  // namespace brigade::cpu
