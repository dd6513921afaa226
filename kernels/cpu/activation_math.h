// The scalar math of the activations whose cost is an exponential: sigmoid, SiLU, GELU and their
// derivatives, written once as templates over the number type. kernels/cpu/elementwise.cpp runs them
// on float and double, one element at a time; kernels/cpu/elementwise_avx2.cpp runs the same
// templates on eight floats at once (an AVX2 register), with its own exp.
//
// Everything here sits in an anonymous namespace on purpose: each file that includes it gets its own
// copies, so the copies compiled for AVX2 can never be merged by the linker with (and run in place
// of) the baseline ones on a CPU without AVX2.
#pragma once

#include <cmath>

namespace brigade::cpu {
namespace {

constexpr double kSqrt2OverPi = 0.7978845608028654;  // sqrt(2 / pi), GELU's tanh approximation
constexpr double kGeluCubic = 0.044715;

// exp for float and double; the AVX2 file declares exp(Vec8) in this namespace before including.
template <class T>
T exp_of(T x) {
  using std::exp;
  return exp(x);
}

template <class T> T sigmoid(T x) { return T(1) / (T(1) + exp_of(-x)); }

// GELU, tanh approximation: 0.5 x (1 + tanh(u)) with u = sqrt(2/pi) (x + 0.044715 x^3).
// Since 0.5 (1 + tanh(u)) = sigmoid(2u), this is x / (1 + exp(-2u)): one exp instead of a tanh
// (several times faster), and no cancellation in 1 + tanh(u) for negative x.
template <class T> T gelu_inner(T x) { return T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x); }
template <class T> T gelu(T x) { return x / (T(1) + exp_of(T(-2) * gelu_inner(x))); }

// d gelu / dx = s + x s (1 - s) 2 du/dx, with s = sigmoid(2u) and du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2).
template <class T> T gelu_derivative(T x) {
  const T s = sigmoid(T(2) * gelu_inner(x));
  const T du = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluCubic) * x * x);
  return s + x * s * (T(1) - s) * T(2) * du;
}

template <class T> T silu(T x) { return x * sigmoid(x); }

// silu(x) = x sigmoid(x); its derivative is s (1 + x (1 - s)).
template <class T> T silu_derivative(T x) {
  const T s = sigmoid(x);
  return s * (T(1) + x * (T(1) - s));
}

}  // namespace
}  // namespace brigade::cpu
