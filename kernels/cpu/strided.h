// Walking strided tensors on the CPU.
//
// A tensor is (pointer, shape, strides), so "visit every element" is an odometer over the dims:
// bump the last index, carry into the one before when it wraps, and recompute the address. Doing
// that per element would cost more than the arithmetic most kernels do, so the walkers below do the
// index work once per *run* of elements and hand the kernel a plain inner loop:
//
//   row(ptrs, strides, length):  ptrs[k] points at the run's first element of operand k (a byte
//                                pointer: operands may differ in dtype); operand k's element i
//                                lives at ptrs[k] + i * strides[k] elements.
//
// With strides of 1 that loop is what the compiler vectorises. Broadcast operands get stride 0.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace brigade::cpu {

// The geometry of `t` seen through `shape` (t's shape must broadcast to it): strides in elements,
// 0 along broadcast dimensions.
Strides broadcast_strides(const Tensor& t, const Shape& shape);

// A loop nest over `shape` with each operand's strides, after merging every pair of neighbouring
// dims that all operands lay out back to back (stride[d] == stride[d+1] * size[d+1]) and dropping
// size-1 dims. Contiguous operands of the same shape collapse to a single dim: one flat loop.
struct LoopNest {
  Shape shape;                   // at least one dim
  std::vector<Strides> strides;  // strides[k][d]: operand k, dim d, in elements
};
LoopNest coalesce(const Shape& shape, const std::vector<const Tensor*>& operands);

// For elementwise kernels: calls row(ptrs, strides, length) on runs of consecutive elements of
// `shape` (row-major order) until every element has been visited exactly once. A run lies along
// one dim of the coalesced loop nest, so it may span several rows of `shape` (all of it, when the
// operands are contiguous) or only part of one (where the work is split between threads). Kernels
// must therefore treat every element independently; use for_each_line to work along a dim.
// operands[0] is usually the output; each element is written by exactly one thread.
template <class RowFn>
void for_each_row(const Shape& shape, const std::vector<const Tensor*>& operands, RowFn&& row);

// For kernels that work along one dim (softmax and friends): calls line(ptrs, strides, length) once
// for every line of `shape` along `dim` — the elements whose indices differ only in `dim` — with
// length = shape[dim]. Lines are split between threads, never within one, so anything a kernel
// accumulates along a line is computed in one fixed order.
template <class LineFn>
void for_each_line(const Shape& shape, int64_t dim, const std::vector<const Tensor*>& operands, LineFn&& line);

}  // namespace brigade::cpu

#include "kernels/cpu/strided_impl.h"
