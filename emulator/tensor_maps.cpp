// Tensor maps and the TMA's tile copy, as the CUDA driver API and the PTX ISA define them:
//
//   - cuTensorMapEncodeTiled (cuda.h's documentation of it): checks every documented rule on the
//     arguments and writes the emulator's own encoding into the 128 opaque bytes of a CUtensorMap
//     (a program must not read them, and the emulator reads only what it wrote).
//   - cp.async.bulk.tensor.Nd.shared::cluster.global.tile.mbarrier::complete_tx::bytes (the PTX ISA's
//     "Data Movement and Conversion Instructions: cp.async.bulk.tensor"): the box at the given
//     coordinates, elements outside the tensor read as zero (the map's OOB fill NONE), laid out in
//     shared memory box-row after box-row, and swizzled. Then like every bulk copy
//     (async_copies.cpp): the destination is poisoned until the copy lands, as late as possible, and
//     complete-tx takes the whole box's bytes off the mbarrier — out-of-bounds elements included.
//
// Swizzling (CU_TENSOR_MAP_SWIZZLE_128B: "swizzle 16B chunks within 128B span"): the 16-byte chunk
// at bits 4-6 of a shared address is exchanged by XOR with bits 7-9, so row r of 128 bytes holds its
// chunk c at position c ^ (r % 8) and the pattern repeats every 1024 bytes. It is a function of the
// shared address itself, which is why wgmma's descriptor (wgmma.cpp) reads the same pattern back when
// both start 1024-aligned. The 32B and 64B patterns, interleaved layouts, element strides other than 1
// and the NaN OOB fill are not modelled: encoding a map that uses them fails with a clear message
// (elementStrides[0] is ignored, as the documentation says, without interleaving).
#include <cuda.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "emulator/simt.h"

namespace brigade::emu {
namespace {

constexpr uint32_t kMagic = 0x7e45a9b1u;  // marks a map this emulator encoded

// The emulator's encoding, inside CUtensorMap's 128 bytes.
struct EncodedMap {
  uint32_t magic;
  uint8_t element_bytes, rank, swizzle;
  const unsigned char* global;
  uint32_t dims_minus_one[5];  // each dim is 1 .. 2^32
  uint64_t strides[4];         // bytes between neighbours along dims 1 .. rank-1
  uint16_t box[5];             // 1 .. 256
};
static_assert(sizeof(EncodedMap) <= sizeof(CUtensorMap), "the encoding must fit in a CUtensorMap");

int element_bytes(CUtensorMapDataType type) {
  switch (type) {
    case CU_TENSOR_MAP_DATA_TYPE_UINT8: return 1;
    case CU_TENSOR_MAP_DATA_TYPE_UINT16:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16: return 2;
    case CU_TENSOR_MAP_DATA_TYPE_UINT32:
    case CU_TENSOR_MAP_DATA_TYPE_INT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ: return 4;
    case CU_TENSOR_MAP_DATA_TYPE_UINT64:
    case CU_TENSOR_MAP_DATA_TYPE_INT64:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT64: return 8;
    default: return 0;  // the packed 4- and 6-bit types: not modelled
  }
}

// The last refusal, for the emulator's tests and for a person debugging one (the driver has no
// message to give: it returns CUDA_ERROR_INVALID_VALUE).
thread_local std::string last_refusal;

CUresult refuse(const std::string& why) {
  last_refusal = "cuTensorMapEncodeTiled: " + why;
  return CUDA_ERROR_INVALID_VALUE;
}

}  // namespace

const std::string& tensor_map_refusal() { return last_refusal; }

CUresult CUDAAPI encode_tensor_map_tiled(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank, void* global,
                                         const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                                         const cuuint32_t* element_strides, CUtensorMapInterleave interleave,
                                         CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill fill) {
  (void)l2;  // a cache hint: no effect on what is copied
  if (map == nullptr || dims == nullptr || box == nullptr || element_strides == nullptr || (rank > 1 && !strides))
    return refuse("a null pointer argument");
  if (reinterpret_cast<uintptr_t>(map) % 64 != 0) return refuse("the tensorMap address is not 64-byte aligned");
  const int size = element_bytes(type);
  if (size == 0) return refuse("data type " + std::to_string(int(type)) + " is not modelled by the emulator");
  if (rank < 1 || rank > 5) return refuse("tensorRank " + std::to_string(rank) + " (1 to 5)");
  if (reinterpret_cast<uintptr_t>(global) % 16 != 0) return refuse("globalAddress is not 16-byte aligned");
  if (interleave != CU_TENSOR_MAP_INTERLEAVE_NONE) return refuse("interleaved layouts are not modelled by the emulator");
  if (swizzle != CU_TENSOR_MAP_SWIZZLE_NONE && swizzle != CU_TENSOR_MAP_SWIZZLE_128B)
    return refuse("only SWIZZLE_NONE and SWIZZLE_128B are modelled by the emulator");
  if (fill != CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) return refuse("the NaN out-of-bounds fill is not modelled by the emulator");
  EncodedMap e{};
  e.magic = kMagic;
  e.element_bytes = uint8_t(size);
  e.rank = uint8_t(rank);
  e.swizzle = swizzle == CU_TENSOR_MAP_SWIZZLE_128B ? 128 : 0;
  e.global = static_cast<const unsigned char*>(global);
  for (cuuint32_t d = 0; d < rank; ++d) {
    const std::string which = "[" + std::to_string(d) + "]";
    if (dims[d] == 0 || dims[d] > (uint64_t(1) << 32)) return refuse("globalDim" + which + " must be 1 to 2^32");
    if (box[d] == 0 || box[d] > 256) return refuse("boxDim" + which + " must be 1 to 256");
    if (element_strides[d] == 0 || element_strides[d] > 8) return refuse("elementStrides" + which + " must be 1 to 8");
    if (d > 0 && element_strides[d] != 1) return refuse("element strides other than 1 are not modelled by the emulator");
    e.dims_minus_one[d] = uint32_t(dims[d] - 1);
    e.box[d] = uint16_t(box[d]);
  }
  for (cuuint32_t d = 0; d + 1 < rank; ++d) {
    const std::string which = "[" + std::to_string(d) + "]";
    if (strides[d] % 16 != 0 || strides[d] >= (uint64_t(1) << 40))
      return refuse("globalStrides" + which + " = " + std::to_string(strides[d]) + " must be a multiple of 16 below 2^40");
    e.strides[d] = strides[d];
  }
  // Each stride spans the dimension below it (the documentation's padding rule).
  uint64_t span = uint64_t(size) * dims[0];
  for (cuuint32_t d = 0; d + 1 < rank; ++d) {
    if (strides[d] < span)
      return refuse("globalStrides[" + std::to_string(d) + "] = " + std::to_string(strides[d]) + " bytes is less than the " +
                    std::to_string(span) + " bytes of the dimensions below it");
    span = strides[d] * dims[d + 1];
  }
  const uint64_t inner = uint64_t(box[0]) * uint64_t(size);
  if (inner % 16 != 0) return refuse("boxDim[0] * element size = " + std::to_string(inner) + " bytes, not a multiple of 16");
  if (swizzle == CU_TENSOR_MAP_SWIZZLE_128B && inner > 128)
    return refuse("boxDim[0] * element size = " + std::to_string(inner) + " bytes, more than the 128-byte swizzle span");
  std::memset(map, 0, sizeof(CUtensorMap));
  std::memcpy(map, &e, sizeof(e));
  last_refusal.clear();
  return CUDA_SUCCESS;
}

void cp_async_bulk_tensor_to_shared(uint32_t dst, const void* map, const int32_t* coords, int rank, uint32_t bar) {
  const char* what = "cp.async.bulk.tensor";
  if (reinterpret_cast<uintptr_t>(map) % 64 != 0) kernel_fault(std::string(what) + " with a tensor map that is not 64-byte aligned");
  EncodedMap e;
  std::memcpy(&e, map, sizeof(e));
  if (e.magic != kMagic) kernel_fault(std::string(what) + " with a tensor map cuTensorMapEncodeTiled did not make");
  if (e.rank != rank)
    kernel_fault(std::string(what) + "." + std::to_string(rank) + "d with a tensor map of rank " + std::to_string(e.rank));
  if (dst % 128 != 0) kernel_fault(std::string(what) + " into shared memory that is not 128-byte aligned");
  uint64_t box_elements = 1;
  for (int d = 0; d < rank; ++d) box_elements *= e.box[d];
  const size_t size = e.element_bytes, row_bytes = size_t(e.box[0]) * size;
  const size_t total = size_t(box_elements) * size;
  if (total > 227 * 1024) kernel_fault(std::string(what) + " of a box larger than a block's shared memory (227 KiB)");

  // Gather the box row by row (dim 0 is a row), zero where it leaves the tensor.
  std::vector<unsigned char> box(total, 0);
  const uint64_t rows = box_elements / e.box[0];
  for (uint64_t row = 0; row < rows; ++row) {
    int64_t at[5] = {coords[0], 0, 0, 0, 0};
    bool inside = true;
    uint64_t rest = row, offset = 0;
    for (int d = 1; d < rank; ++d) {
      at[d] = int64_t(coords[d]) + int64_t(rest % e.box[d]);
      rest /= e.box[d];
      inside = inside && at[d] >= 0 && at[d] <= int64_t(e.dims_minus_one[d]);
      if (inside) offset += uint64_t(at[d]) * e.strides[d - 1];
    }
    // The row's elements inside the tensor: x in [first, last).
    const int64_t first = std::max<int64_t>(at[0], 0), last = std::min<int64_t>(at[0] + e.box[0], int64_t(e.dims_minus_one[0]) + 1);
    if (!inside || first >= last) continue;
    const unsigned char* src = e.global + offset + uint64_t(first) * size;
    const size_t bytes = size_t(last - first) * size;
    if (std::string error = check_global_range("cp.async.bulk.tensor's source", src, bytes); !error.empty())
      kernel_fault(error);
    std::memcpy(&box[size_t(row) * row_bytes + size_t(first - at[0]) * size], src, bytes);
  }
  // Place it: 16-byte chunks, each at its swizzled address.
  std::vector<SharedRun> runs;
  if (e.swizzle == 0) {
    runs.push_back(SharedRun{dst, std::move(box)});
  } else {
    for (size_t chunk = 0; chunk < total; chunk += 16)
      runs.push_back(SharedRun{swizzle_128(dst + uint32_t(chunk)),
                               std::vector<unsigned char>(box.begin() + long(chunk), box.begin() + long(chunk + 16))});
  }
  queue_bulk_copy(std::move(runs), bar, what);
}

}  // namespace brigade::emu
