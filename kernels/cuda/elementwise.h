// CUDA kernels: elementwise — same signatures as kernels/cpu/elementwise (see kernels/cuda/kernels.h).
//
// f32, f64, bf16 and f16 directly (16-bit values are computed in f32 and rounded once on store).
// Operands share out's dtype, except add_inplace, whose src may also be f32 for a bf16/f16 dst.
// Inputs may be any strided or broadcast view; outputs any view without self-overlap.
#pragma once

#include "core/tensor.h"
#include "kernels/ops.h"

namespace brigade::cuda {

void binary(ops::BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b);
void unary(ops::UnaryOp op, const Tensor& out, const Tensor& x);
void unary_backward(ops::UnaryOp op, const Tensor& grad_x, const Tensor& grad_y, const Tensor& x, const Tensor& y);
void scale_shift(const Tensor& out, const Tensor& x, double scale, double shift);
void pow_scalar(const Tensor& out, const Tensor& x, double exponent);
void pow_scalar_backward(const Tensor& grad_x, const Tensor& grad_y, const Tensor& x, double exponent);
void add_inplace(const Tensor& dst, const Tensor& src, double alpha);
// Any dtype for out/x (values are only moved) and for mask (non-zero = fill).
void masked_fill(const Tensor& out, const Tensor& x, const Tensor& mask, double value);

}  // namespace brigade::cuda
