// make_tensor_map_2d: one cuTensorMapEncodeTiled call, reached without linking libcuda.
#include "kernels/cuda/tensor_map.h"

#include <cuda_runtime_api.h>

#include <mutex>

#include "core/error.h"

namespace brigade::cuda {
namespace {

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// The driver's cuTensorMapEncodeTiled (CUDA 12.0's signature), looked up once.
EncodeTiled encode_tiled() {
  static EncodeTiled function = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    void* pointer = nullptr;
    cudaDriverEntryPointQueryResult status{};
    const cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &pointer, 12000,
                                                           cudaEnableDefault, &status);
    BRIGADE_CHECK(e == cudaSuccess && status == cudaDriverEntryPointSuccess && pointer != nullptr,
                  "the CUDA driver has no cuTensorMapEncodeTiled (cudaGetDriverEntryPointByVersion: ",
                  cudaGetErrorString(e), ", query result ", int(status), "): TMA needs a driver for CUDA 12.0 or newer");
    function = reinterpret_cast<EncodeTiled>(pointer);
  });
  return function;
}

CUtensorMapDataType tensor_map_type(DType dtype) {
  switch (dtype) {
    case DType::bf16: return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    case DType::f16: return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    case DType::f32: return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    case DType::f64: return CU_TENSOR_MAP_DATA_TYPE_FLOAT64;
    default: fail("tensor maps: no TMA data type for ", dtype_name(dtype));
  }
}

// The row stride a one-row matrix is described with: the driver wants a multiple of 16 bytes, at
// least a row, even when no second row exists.
int64_t single_row_stride(int64_t cols, int64_t element_size) {
  return (cols * element_size + 15) / 16 * 16 / element_size;
}

}  // namespace

bool tensor_map_can_describe(const void* data, DType dtype, int64_t rows, int64_t cols, int64_t row_stride) {
  const int64_t size = int64_t(dtype_size(dtype));
  if (rows == 1) row_stride = single_row_stride(cols, size);  // never used: any valid stride will do
  return reinterpret_cast<uintptr_t>(data) % 16 == 0 && rows >= 1 && cols >= 1 && rows <= (int64_t(1) << 32) &&
         cols <= (int64_t(1) << 32) && (row_stride * size) % 16 == 0 && row_stride >= cols &&
         row_stride * size < (int64_t(1) << 40);
}

CUtensorMap make_tensor_map_2d(const char* what, const void* data, DType dtype, int64_t rows, int64_t cols,
                               int64_t row_stride, int box_rows, int box_cols) {
  BRIGADE_CHECK(tensor_map_can_describe(data, dtype, rows, cols, row_stride), what, ": a ", dtype_name(dtype),
                " matrix [", rows, ", ", cols, "] with row stride ", row_stride,
                " cannot be a TMA tensor map (it needs a 16-byte aligned start and row stride, a row stride of at "
                "least a row, and sides of at most 2^32)");
  BRIGADE_CHECK(box_rows >= 1 && box_rows <= 256 && box_cols >= 1 && box_cols <= 256 &&
                    int64_t(box_cols) * int64_t(dtype_size(dtype)) <= 128,
                what, ": a TMA box of [", box_rows, ", ", box_cols, "] ", dtype_name(dtype),
                " elements (each side at most 256, a row at most the 128-byte swizzle span)");
  if (rows == 1) row_stride = single_row_stride(cols, int64_t(dtype_size(dtype)));
  const cuuint64_t dims[2] = {cuuint64_t(cols), cuuint64_t(rows)};
  const cuuint64_t strides[1] = {cuuint64_t(row_stride) * cuuint64_t(dtype_size(dtype))};
  const cuuint32_t box[2] = {cuuint32_t(box_cols), cuuint32_t(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  CUtensorMap map;
  const CUresult r = encode_tiled()(&map, tensor_map_type(dtype), 2, const_cast<void*>(data), dims, strides, box,
                                    element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                    CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  BRIGADE_CHECK(r == CUDA_SUCCESS, what, ": cuTensorMapEncodeTiled refused a ", dtype_name(dtype), " matrix [", rows,
                ", ", cols, "] (row stride ", row_stride, ", box [", box_rows, ", ", box_cols, "]): CUresult ", int(r));
  return map;
}

}  // namespace brigade::cuda
