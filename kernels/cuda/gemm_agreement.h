// The tuner's correctness guard: whether a candidate GEMM computes the same product as cuBLAS, checked
// exactly. It is what stands between a user and a kernel that has never run on their hardware (the
// Hopper GEMM was written against documents and an emulator).
//
// The check never looks at the user's data (zeros or one-hot inputs would make every kernel agree).
// It runs each candidate on synthetic operands of the call's exact geometry — the same shapes,
// strides, storage offset modulo 128 elements (so the same alignment, hence the same path through
// run_gemm and the same copies) and broadcast batch dims — filled with small integers in [−2, 2] from
// a fixed hash (in [−1, 1] for k > 2¹⁸), with a bias, if any, of small integers too. Every product is
// then an integer of magnitude at most 4, every partial sum an integer of magnitude at most 4k ≤ 2²⁰:
// exact in f32 whatever the summation order, and exact even in an accumulator that keeps fewer bits
// than f32 (as tensor cores may). So the product is one number, and any correct GEMM must deliver it:
//   - the product plus bias (the kept pre-activation, or the output when there is no activation) is
//     compared exactly: it must equal round(round(exact sum) + bias) in out's dtype, the sum taken
//     from cuBLAS with an f32 output (exact, see above), rounded to out's dtype, the bias added in f32
//     (exact), rounded again. Two roundings, because that is the epilogues' arithmetic
//     (kernels/cuda/epilogue.cuh rounds where the separate matmul and add ops round, so fusing never
//     changes bits). A first version required one rounding; the emulator's small test shapes never
//     reached sums past 256, where bf16 stops holding every integer, and an H200 then refused the
//     tensor-core and Hopper GEMMs on GPT-2's shapes by one ulp;
//   - with GELU, the output is compared with cuBLAS's within
//         8 u_out |ref| + 4 u_out |pre| + 2 x the smallest normal of out's dtype
//     (u_out: the output dtype's unit roundoff, bf16 2⁻⁸, f16 2⁻¹¹, f32 2⁻²⁴). Why a correct GELU stays
//     within it: cuBLAS applies GELU to its rounded pre (at most one rounding, u_out |pre|, away from the
//     exact one; GELU's slope is below 1.13), the fused GEMMs to the f32 value; GELU's own f32
//     arithmetic (erf or tanh, contracted or not) loses a few f32 ulps, and its cancellation for
//     negative inputs about u_f32 |pre| ≤ u_out |pre|; each result is rounded once more (u_out |ref|
//     each). The sum is below 1.13 u_out |pre| + 2 u_out |ref| + a few u_f32 (|pre| + |ref|); the
//     bound doubles that. Underflowing results are covered by the last term.
//     When the call has GELU but keeps no pre, the synthetic run keeps one anyway, so that the product
//     is still checked exactly.
// The synthetic outputs are filled with NaN (all bits set: NaN in f32, bf16 and f16) before each run,
// and the reference holds only finite values: an element a kernel does not write always disagrees.
// Equality is by value: +0 equals −0 (the sign of an exact zero sum says nothing about the product),
// and a NaN equals nothing.
#pragma once

#include <string>

#include "kernels/cuda/gemm_call.h"

namespace brigade::cuda {

// Beyond this k the synthetic sums (≤ k in magnitude with entries in [−1, 1]) would no longer be
// exact in every accumulator; the tuner leaves such calls to cuBLAS.
constexpr int64_t kMaxCheckedK = int64_t(1) << 20;

// A call with `call`'s geometry on synthetic operands (see above): new a, b, bias (when `call` has
// one) and NaN-ready out and pre (pre whenever `call` keeps one or applies an activation).
// Allocates on call.out's device; throws what the allocator throws when memory runs out.
GemmCall synthetic_call(const GemmCall& call);

// Fills out (and pre) with NaN on out's current stream: before each checked run.
void fill_nan(const GemmCall& call);

// What a synthetic call must produce, on the host, in f32 (f64 for f64 products): the exact product
// plus bias, rounded once to out's dtype, and (with an activation) cuBLAS's output. Build it after
// cuBLAS ran the synthetic call (it reads its out); it runs one more cuBLAS GEMM, with an f32 output.
struct GemmReference {
  Tensor product;  // round(a @ b + bias), compared with the call's pre (out when there is no activation)
  Tensor out;      // cuBLAS's out; undefined when there is no activation
};
GemmReference gemm_reference(const GemmCall& synthetic);

// Empty when the synthetic call's pre (or out) equals ref.product everywhere and its out (with an
// activation) is within the GELU bound of ref.out; else one line naming the worst element.
std::string gemm_disagreement(const GemmReference& ref, const GemmCall& synthetic);

}  // namespace brigade::cuda
