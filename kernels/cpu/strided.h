// Walking strided tensors on the CPU.
//
// Every elementwise reference kernel has the same shape: for each output position, read inputs at
// their own strides (0 for broadcast dims) and write one output. StridedLoop does the index
// arithmetic once, as an odometer over all dims but the last, and hands the kernel one row at a
// time with each operand's pointer and stride along the row — a plain inner loop the compiler can
// vectorise when the strides are 1.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace brigade::cpu {

// The geometry of `t` seen through `shape` (t's shape must broadcast to it): strides in elements,
// 0 along broadcast dimensions.
Strides broadcast_strides(const Tensor& t, const Shape& shape);

// Calls row(ptrs, row_strides, length) for every row of `shape`, where ptrs[k] points at the row's
// first element of operand k (byte pointers: operands may differ in dtype). Rows are split across
// threads when the tensor is large; rows never overlap, so outputs are written by one thread each.
template <class RowFn>
void for_each_row(const Shape& shape, const std::vector<const Tensor*>& operands, RowFn&& row);

}  // namespace brigade::cpu

#include "kernels/cpu/strided_impl.h"
