// Tensor maps: what the TMA (cp.async.bulk.tensor, kernels/cuda/bulk_copy.cuh) needs to know about a
// tensor in global memory — its address, sizes and strides, the box one copy moves, and how the box
// is swizzled in shared memory. The driver encodes one (cuTensorMapEncodeTiled); brigade reaches
// that function through the runtime's cudaGetDriverEntryPointByVersion, so no binary links libcuda.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "core/dtype.h"

namespace brigade::cuda {

// A row-major matrix [rows, cols] with `row_stride` elements between rows (cols contiguous), copied
// in boxes of [box_rows, box_cols] with the 128-byte swizzle (box_cols * element size <= 128).
// Checks what the driver requires (16-byte aligned base and row stride, at most 256 per box side)
// and throws an Error naming the matrix, shape and rule otherwise; `what` names it ("matmul A").
CUtensorMap make_tensor_map_2d(const char* what, const void* data, DType dtype, int64_t rows, int64_t cols,
                               int64_t row_stride, int box_rows, int box_cols);

// Whether make_tensor_map_2d takes such a matrix (the layout rules only, no driver call).
bool tensor_map_can_describe(const void* data, DType dtype, int64_t rows, int64_t cols, int64_t row_stride);

}  // namespace brigade::cuda
