// The running (max, sum of exponentials) behind softmax, log-softmax and cross entropy.
//
// exp(x) overflows for x > 88 in f32, so softmax subtracts the line's maximum first. Finding the
// maximum and then the sum would read the line twice; instead each thread keeps a running pair
// (m, s) with s = sum of exp(x - m) over what it has seen, and rescales s by exp(m_old - m_new)
// whenever a larger element raises m. Two threads' pairs merge the same way, so a warp or a block
// combines them with the usual reductions. At the end, log(sum exp(x)) = m + log(s).
#pragma once

#include "kernels/cuda/common.cuh"

namespace brigade::cuda {

template <class C>
struct MaxSum {
  C max;
  C sum;
};

template <class C>
__device__ __forceinline__ MaxSum<C> shfl_xor(MaxSum<C> v, int mask) {
  return {__shfl_xor_sync(kFullMask, v.max, mask), __shfl_xor_sync(kFullMask, v.sum, mask)};
}

template <class C>
__device__ __forceinline__ MaxSum<C> empty_max_sum() {
  return {-C(INFINITY), C(0)};
}

// Adds one element. The max never becomes NaN (NaN > m is false), but a NaN element makes the sum
// NaN, and with it the whole line — as on the CPU. Elements of -inf (masked positions) add 0.
template <class C>
__device__ __forceinline__ MaxSum<C> push(MaxSum<C> s, C v) {
  if (v > s.max) {
    s.sum = s.sum * dev_exp(s.max - v) + C(1);  // rescale what was summed against the old max
    s.max = v;
  } else if (s.max != -C(INFINITY)) {
    s.sum += dev_exp(v - s.max);
  } else if (v != v) {
    s.sum = v;
  }
  return s;
}

// Adds W elements at once (a 16-byte vector's worth): the max of the chunk first, then one rescale
// of the running sum for the whole chunk instead of one per new maximum — an exp per element plus
// one per chunk. Same NaN and -inf behaviour as push.
template <class C, int W>
__device__ __forceinline__ MaxSum<C> push_chunk(MaxSum<C> s, const C (&v)[W]) {
  if constexpr (W == 1) {
    return push(s, v[0]);
  } else {
    C m = s.max;
#pragma unroll
    for (int j = 0; j < W; ++j) m = v[j] > m ? v[j] : m;
    if (m == -C(INFINITY)) {  // nothing but -inf (or NaN) so far: keep a NaN, add nothing else
#pragma unroll
      for (int j = 0; j < W; ++j)
        if (v[j] != v[j]) s.sum = v[j];
      return s;
    }
    C sum = m == s.max ? s.sum : s.sum * dev_exp(s.max - m);
#pragma unroll
    for (int j = 0; j < W; ++j) sum += dev_exp(v[j] - m);
    return {m, sum};
  }
}

// Merging is commutative bit for bit (a + b == b + a in IEEE arithmetic), so a butterfly reduction
// leaves the same pair in every lane.
struct MergeMaxSum {
  template <class C>
  __device__ __forceinline__ MaxSum<C> operator()(MaxSum<C> a, MaxSum<C> b) const {
    const C m = a.max > b.max ? a.max : b.max;
    if (m == -C(INFINITY)) return {m, a.sum + b.sum};  // both empty (or all -inf): nothing to rescale
    return {m, a.sum * dev_exp(a.max - m) + b.sum * dev_exp(b.max - m)};
  }
};

}  // namespace brigade::cuda
