// brigade::cpu — the reference kernels. Plain loops written for clarity: they are the oracle every
// CUDA kernel is checked against, and the path that runs everywhere (CI, laptops, learners).
//
// Contract: the op layer (kernels/*.cpp) has already checked shapes, dtypes and devices, allocated
// the outputs and widened bf16/f16 to f32. Kernels only compute; they never throw on valid input.
// Inputs may be strided views; outputs are whatever the op layer passes (usually contiguous).
#pragma once

#include "core/tensor.h"
#include "kernels/ops.h"

namespace brigade::cpu {

// copy.cpp
void copy(const Tensor& dst, const Tensor& src);  // src broadcasts to dst; any dtypes
void fill(const Tensor& dst, double value);

// elementwise.cpp — out has the broadcast shape; inputs broadcast to it.
void binary(ops::BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b);
void unary(ops::UnaryOp op, const Tensor& out, const Tensor& x);
void unary_backward(ops::UnaryOp op, const Tensor& grad_x, const Tensor& grad_y, const Tensor& x, const Tensor& y);
void scale_shift(const Tensor& out, const Tensor& x, double scale, double shift);
void pow_scalar(const Tensor& out, const Tensor& x, double exponent);
void pow_scalar_backward(const Tensor& grad_x, const Tensor& grad_y, const Tensor& x, double exponent);
void add_inplace(const Tensor& dst, const Tensor& src, double alpha);
void masked_fill(const Tensor& out, const Tensor& x, const Tensor& mask, double value);

}  // namespace brigade::cpu

// The other families, one header each.
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/softmax.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/dropout.h"
#include "kernels/cpu/conv.h"
#include "kernels/cpu/pool.h"
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/indices.h"
