// A linear layer's epilogue on the GPU: pre = product + bias, out = act(pre), one element at a time.
// The tensor-core GEMM applies it to its accumulators before they leave registers; the other GEMMs
// write the product and epilogue.cu's kernel applies it in one pass. Both call add_bias() and activate() below, so the
// paths cannot drift apart — and they round exactly where the separate matmul, add and gelu ops
// round (the product, the sum, the activation: each to the output dtype), so fusing never changes bits.
// `pre` has C's layout (same strides), so one offset serves both.
#pragma once

#include "kernels/cuda/activation.cuh"
#include "kernels/cuda/gemm.h"   // GemmEpilogue
#include "kernels/cuda/mma.cuh"  // store_pair
#include "kernels/params.h"

namespace brigade::cuda {

template <class Out>
struct Epilogue {
  const Out* bias = nullptr;  // [n], or null: no bias
  Out* pre = nullptr;         // where the value before the activation goes (laid out as C), or null
  bool gelu = false;

  __host__ __device__ bool active() const { return bias != nullptr || pre != nullptr || gelu; }
};

// A problem's epilogue (gemm.h) as the kernels take it.
template <class Out>
Epilogue<Out> epilogue_of(const GemmEpilogue& g) {
  Epilogue<Out> e;
  e.bias = static_cast<const Out*>(g.bias);
  e.pre = static_cast<Out*>(g.pre);
  e.gelu = g.activation == Activation::gelu;
  return e;
}

// The epilogue of one element in two steps, so a caller can store `pre` its own way (the tensor-core
// GEMM stores pairs): the product (not yet rounded) plus the bias, rounded to Out ...
template <class Out>
__device__ __forceinline__ Out add_bias(const Epilogue<Out>& e, compute_t<Out> product, int64_t col) {
  const Out h = from_compute<Out>(product);
  return e.bias ? from_compute<Out>(to_compute(h) + to_compute(e.bias[col])) : h;
}

// ... and the activation of that, in the compute type but already rounded to Out (so converting it
// to Out again is exact).
template <class Out>
__device__ __forceinline__ compute_t<Out> activate(const Epilogue<Out>& e, Out h) {
  return e.gelu ? to_compute(from_compute<Out>(gelu(to_compute(h)))) : to_compute(h);
}

// How the tensor-core GEMMs (mma.sync and wgmma) store their accumulators: the pair (v0, v1) of C at
// element offset `at`, columns col and col + 1 (the second only when second_ok), through the
// epilogue when there is one — `pre` first, then the activation. pair_ok: C's and pre's layout allow
// one paired store.
template <class Out>
__device__ __forceinline__ void store_accumulator_pair(const Epilogue<Out>& e, Out* c, Out* pre, int64_t at,
                                                       int64_t col, float v0, float v1, bool pair_ok, bool second_ok) {
  if (e.active()) {
    const Out h0 = add_bias(e, v0, col), h1 = second_ok ? add_bias(e, v1, col + 1) : h0;
    if (pre) store_pair(pre + at, to_compute(h0), to_compute(h1), pair_ok, second_ok);
    v0 = activate(e, h0), v1 = activate(e, h1);
  }
  store_pair(c + at, v0, v1, pair_ok, second_ok);
}

}  // namespace brigade::cuda
