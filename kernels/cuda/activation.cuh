// The scalar math of the activations whose cost is an exponential, for CUDA kernels (C is float or
// double): the formulas of kernels/cpu/activation_math.h, written with the device's exp. Shared by
// the elementwise ops (elementwise.cu) and the GEMM epilogues (epilogue.cuh), so a fused GELU computes
// exactly what the gelu op computes.
#pragma once

#include "kernels/cuda/common.cuh"

namespace brigade::cuda {

constexpr double kSqrt2OverPi = 0.7978845608028654;  // GELU's tanh approximation, as on the CPU
constexpr double kGeluCubic = 0.044715;

template <class C> __device__ __forceinline__ C sigmoid(C x) { return C(1) / (C(1) + dev_exp(-x)); }
template <class C> __device__ __forceinline__ C gelu_inner(C x) {
  return C(kSqrt2OverPi) * (x + C(kGeluCubic) * x * x * x);
}
// 0.5 x (1 + tanh(u)) = x sigmoid(2u): one exp, no cancellation for negative x.
template <class C> __device__ __forceinline__ C gelu(C x) { return x / (C(1) + dev_exp(C(-2) * gelu_inner(x))); }
template <class C> __device__ __forceinline__ C gelu_derivative(C x) {
  const C s = sigmoid(C(2) * gelu_inner(x));
  const C du = C(kSqrt2OverPi) * (C(1) + C(3 * kGeluCubic) * x * x);
  return s + x * s * (C(1) - s) * C(2) * du;
}
template <class C> __device__ __forceinline__ C silu_derivative(C x) {
  const C s = sigmoid(x);
  return s * (C(1) + x * (C(1) - s));
}

}  // namespace brigade::cuda
