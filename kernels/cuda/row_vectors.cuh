// 16-byte loads and stores for the row kernels (softmax, norms, cross entropy, embedding backward).
//
// A memory-bound kernel that moves one bf16 per instruction issues eight times the loads of one that
// moves a 16-byte vector, and on an H200 those instructions, not the bytes, were the limit: the bf16
// row kernels ran at 21-27% of the copy bandwidth, the f32 ones (four bytes per load) at 42-60%.
//
// A row is split into three parts, walked by the threads of a RowGroup:
//
//   head    the elements before the first 16-byte boundary, one per thread;
//   body    whole vectors of kVecWidth<T> elements (8 bf16, 4 f32), one vector per thread per step;
//   tail    what is left after the last whole vector, one per thread.
//
// Every pointer the kernel touches at the row's index i must sit at the same distance from a
// 16-byte boundary ("phase"), or a vector load would be misaligned: a contiguous [rows, d] tensor's
// rows all share one phase with the row they came from when d is a multiple of the vector width, and
// otherwise each row has its own — still the same for x and y, so the head absorbs it. A column-
// indexed operand (a norm's weight) has phase 0; rows whose phase differs from it take the scalar
// path (head = the whole row). The kernel body is written once, generic in the chunk's width, so the
// scalar and vector paths compute the same thing element by element.
#pragma once

#include "kernels/cuda/common.cuh"

namespace brigade::cuda {

// A chunk of W consecutive elements: W = 1 on the scalar paths, kVecWidth<T> in the body.
template <int W>
struct Width {
  static constexpr int value = W;
};

// Offset (in bytes) of p from the 16-byte boundary below it.
template <class T>
__device__ __forceinline__ unsigned phase_of(const T* p) {
  return unsigned(reinterpret_cast<uintptr_t>(p) % 16u);
}

// True when every non-null pointer shares the phase of `first`.
template <class T, class... Rest>
__device__ __forceinline__ bool same_phase(const T* first, const Rest*... rest) {
  const unsigned p = phase_of(first);
  return ((rest == nullptr || phase_of(rest) == p) && ...);
}

struct RowSplit {
  int64_t head;     // elements before the first vector
  int64_t vectors;  // whole vectors after the head
  int64_t length;   // the row's length; the tail is what follows head + vectors * width
};

// The split of a row of `length` elements starting at `row` (T-aligned). With vectorise false (the
// operands' phases differ, or a stride is not 1) the whole row is head: the scalar path.
template <class T>
__device__ __forceinline__ RowSplit split_row(const T* row, int64_t length, bool vectorise) {
  constexpr int V = kVecWidth<T>;
  if (!vectorise) return {length, 0, length};
  const int64_t misaligned = int64_t(phase_of(row) / sizeof(T));
  const int64_t head = misaligned == 0 ? 0 : (V - misaligned < length ? V - misaligned : length);
  return {head, (length - head) / V, length};
}

// Calls fn(i, Width<W>{}) for each chunk of the row that this thread (rank of size) owns: the head
// and tail one element at a time, the body a vector at a time. The order each thread sees its
// chunks is fixed by the split alone, so sums over a row stay deterministic.
template <class T, class Fn>
__device__ __forceinline__ void for_each_chunk(const RowSplit& s, int rank, int size, Fn&& fn) {
  constexpr int V = kVecWidth<T>;
  for (int64_t i = rank; i < s.head; i += size) fn(i, Width<1>{});
  for (int64_t k = rank; k < s.vectors; k += size) fn(s.head + k * V, Width<V>{});
  for (int64_t i = s.head + s.vectors * V + rank; i < s.length; i += size) fn(i, Width<1>{});
}

// W elements of p starting at p[i], widened to the compute type: one instruction for a vector.
template <int W, class T>
__device__ __forceinline__ void load_chunk(const T* p, int64_t i, compute_t<T> (&out)[W]) {
  const Vec<T, W> v = load_vec<W>(p + i);
#pragma unroll
  for (int j = 0; j < W; ++j) out[j] = to_compute(v.v[j]);
}

// Rounds W compute values into T and stores them at p[i...]: one instruction for a vector.
template <int W, class T>
__device__ __forceinline__ void store_chunk(T* p, int64_t i, const compute_t<T> (&in)[W]) {
  Vec<T, W> v;
#pragma unroll
  for (int j = 0; j < W; ++j) v.v[j] = from_compute<T>(in[j]);
  store_vec<W>(p + i, v);
}

}  // namespace brigade::cuda
