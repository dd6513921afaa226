// The activations that cost an exponential (exp, sigmoid, SiLU, GELU and the backward of the last
// two), on contiguous f32 arrays, eight elements at a time with AVX2 + FMA. The build targets
// baseline x86-64, where the compiler can neither use AVX2 nor vectorise a call to std::exp; these
// loops do both, and are chosen at run time on CPUs that have AVX2 (kernels/cpu/elementwise.cpp).
// The math is the same templates as the scalar path (kernels/cpu/activation_math.h); only exp
// differs: a polynomial within 2 ulp of the correctly rounded value, where libm is within 1.
#pragma once

#include <cstdint>

#include "kernels/ops.h"

namespace brigade::cpu::avx2 {

// Whether this CPU runs AVX2 and FMA (always false outside x86-64).
bool available();

// Whether unary_f32 has a vector form of `op` (exp, sigmoid, silu, gelu), on any CPU.
bool has_vector_form(ops::UnaryOp op);

// out[i] = op(x[i]) for i < n. Returns false, doing nothing, for an op without a vector form here.
bool unary_f32(ops::UnaryOp op, float* out, const float* x, int64_t n);
// grad_x[i] = grad_y[i] * op'(x[i]) (gelu and silu). Returns false for other ops.
bool unary_backward_f32(ops::UnaryOp op, float* grad_x, const float* grad_y, const float* x, int64_t n);

}  // namespace brigade::cpu::avx2
