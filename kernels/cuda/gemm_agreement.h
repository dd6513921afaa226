// The tuner's correctness guard: whether a candidate GEMM's output agrees with cuBLAS's for the same
// call, within what rounding allows. It is what stands between a user and a kernel that has never
// run on their hardware (the Hopper GEMM was written against documents and an emulator).
//
// The bound, per output element (i, j), with S = Σ_p |a_ip| |b_pj| (computed by cuBLAS in f32 from
// |a| and |b|) and P = |cuBLAS's pre-activation| (its out for a plain matmul or no activation, its
// pre when kept; S + |bias_j| for GELU without a kept pre):
//     |c_ij − ref_ij| ≤ 4 k u_acc S_ij + 8 u_out (P_ij + |bias_j|) + 2 x the smallest normal of out's dtype
// where u_acc is the accumulator's unit roundoff (2⁻²⁴ for f32 accumulation, 2⁻⁵³ for f64) and u_out
// the output dtype's (bf16 2⁻⁸, f16 2⁻¹¹, f32 2⁻²⁴). Why two correct GEMMs stay within it: each sums
// the same k products in some order, within k u_acc S of the exact sum (the classic worst case; 4
// rather than 2 leaves room for tensor cores, which align and truncate rather than round); rounding
// that sum to out's dtype, adding the bias and rounding again moves each by at most
// 2 u_out (P + |bias|); GELU's slope is below 1.13 and its rounding adds u_out |pre| — under
// 6.6 u_out (P + |bias|) between the two. The last term covers products that underflow. A wrong
// tile or a misread stride moves elements by about |c| itself: for bf16, 3% of an element's size is
// already past the bound. NaN agrees only with NaN, an infinity only with itself.
#pragma once

#include <string>

#include "kernels/cuda/gemm_call.h"

namespace brigade::cuda {

// cuBLAS's output of a call, on the host, and each element's bound: contiguous CPU tensors in f32
// (f64 for f64 products), which holds every bf16, f16 and f32 value exactly. Build it right after
// cuBLAS ran the call (it reads call.out and call.pre as they are); it runs one more cuBLAS GEMM, for S.
struct GemmReference {
  Tensor out, pre;  // pre: undefined when the call keeps none
  Tensor bound;     // per element of out (and of pre)
};
GemmReference gemm_reference(const GemmCall& call);

// Empty when call.out (and call.pre) agree with `ref` everywhere, else one line naming the worst
// element: its position, both values, the difference and the bound.
std::string gemm_disagreement(const GemmReference& ref, const GemmCall& call);

}  // namespace brigade::cuda
