// One matmul or linear call as kernels/cuda/matmul.cpp receives it from the op layer, and the one
// function that runs it on a named GEMM: what cuda::matmul does for every backend, and what the
// tuner (kernels/cuda/gemm_tuner.h) calls for each candidate it measures.
#pragma once

#include "core/tensor.h"
#include "kernels/ops.h"

namespace brigade::cuda {

struct GemmCall {
  Tensor out;         // [batch..., m, n], contiguous
  Tensor a, b;        // [batch..., m, k], [batch..., k, n]: out's batch dims (stride 0: broadcast), any strides
  Tensor bias, pre;   // a linear layer's bias [n] and kept pre-activation [m, n]; undefined: none
  Activation act = Activation::none;

  bool has_epilogue() const { return bias.defined() || pre.defined() || act != Activation::none; }
};

// Runs `call` on `backend` (automatic: cuBLAS; not tuned): copies the operands the backend cannot
// read, collapses batch dims and launches on out's current stream. Never synchronises.
void run_gemm(const GemmCall& call, ops::MatmulBackend backend);

// Whether `backend` reads operand x (a, or b when is_b) as it is, without the copy run_gemm makes
// otherwise: the layout a backend cares about (unit strides, 16-byte aligned rows), and part of the
// tuner's key, since a copy changes what a backend costs.
bool reads_in_place(const Tensor& x, bool is_b, ops::MatmulBackend backend);

}  // namespace brigade::cuda
