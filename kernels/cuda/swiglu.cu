// CUDA kernels: SwiGLU's gate. The forward is elementwise_map.cuh's map over (gate, up): 16-byte
// vector loads and stores, silu(gate) * up computed in registers and rounded once, so the [.., hidden]
// silu(gate) a composition of two ops would write and read back never exists. The backward reads
// grad_y, gate and up once and writes both gradients in the same pass (two maps would read grad_y and
// gate twice).
//
// On the GPU (the contract both backends share: kernels/twins/swiglu.inc): contiguous f32, f64,
// bf16 or f16; 16-bit data computes in f32.
#include "kernels/cuda/activation.cuh"
#include "kernels/cuda/elementwise_map.cuh"
#include "kernels/cuda/kernels.h"

namespace brigade::cuda {
namespace {

struct SwiGlu {
  template <class C> __device__ __forceinline__ C operator()(C gate, C up) const { return gate * sigmoid(gate) * up; }
};

template <class T>
__global__ void swiglu_backward_kernel(T* grad_gate, T* grad_up, const T* grad_y, const T* gate, const T* up,
                                       int64_t n) {
  using C = compute_t<T>;
  BRIGADE_GRID_STRIDE_LOOP(i, n, int64_t) {
    const C gy = to_compute(grad_y[i]), g = to_compute(gate[i]), u = to_compute(up[i]);
    grad_gate[i] = from_compute<T>(gy * u * silu_derivative(g));
    grad_up[i] = from_compute<T>(gy * (g * sigmoid(g)));
  }
}

}  // namespace

void swiglu(const Tensor& y, const Tensor& gate, const Tensor& up) {
  visit_floating(gate.dtype(), "swiglu", [&](auto tag) {
    using T = decltype(tag);
    map<T, T, T>("swiglu", SwiGlu{}, y, gate, up);
  });
}

void swiglu_backward(const Tensor& grad_gate, const Tensor& grad_up, const Tensor& grad_y, const Tensor& gate,
                     const Tensor& up) {
  const int64_t n = gate.numel();
  if (n == 0) return;
  visit_floating(gate.dtype(), "swiglu_backward", [&](auto tag) {
    using T = decltype(tag);
    swiglu_backward_kernel<T><<<grid_for(n, gate.device()), kThreads, 0, stream_for(gate)>>>(
        static_cast<T*>(grad_gate.raw_data()), static_cast<T*>(grad_up.raw_data()),
        static_cast<const T*>(grad_y.raw_data()), static_cast<const T*>(gate.raw_data()),
        static_cast<const T*>(up.raw_data()), n);
    BRIGADE_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace brigade::cuda
