// Hopper's instructions against their documentation: cuTensorMapEncodeTiled's argument rules
// (cuda.h), where the TMA's 128-byte swizzle puts each 16-byte chunk of a box and what it reads
// outside the tensor (the driver's CU_TENSOR_MAP_SWIZZLE_128B and OOB fill NONE), and wgmma's
// shared-memory layout and accumulator fragments (the PTX ISA) — against plain C++ computations of
// the same formulas, never against the emulator's own code. The same tests run on the emulator (its
// models) and on an sm_90 GPU (the hardware), which is how the models are checked against the
// hardware; the [emulator_rules] cases break a rule on purpose, which only the emulator survives.
#include <catch2/catch.hpp>

#include <cuda.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/half.h"
#include "tests/gpu/device_array.h"
#include "tests/gpu/hopper_instruction_kernels.h"

using Catch::Contains;
namespace et = brigade::emu_test;
using gpu_test::DeviceArray;
using gpu_test::launch_error;

namespace {

// The "emulator:" cases break a rule on purpose to see the emulator report it. On a GPU a broken TMA
// copy or wgmma ends the CUDA context (an H200 answered the misaligned TMA destination with
// cudaErrorMisalignedAddress, which is sticky), and every case after it fails at its first cudaMalloc.
bool emulator_only(const char* what) {
#ifdef BRIGADE_CUDA_EMULATOR
  (void)what;
  return false;
#else
  WARN("a real GPU: " << what << " runs on the CUDA emulator only (a broken copy or mma would end the context)");
  return true;
#endif
}

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

EncodeTiled encoder() {
  void* f = nullptr;
  cudaDriverEntryPointQueryResult status{};
  REQUIRE(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &status) ==
          cudaSuccess);
  REQUIRE(status == cudaDriverEntryPointSuccess);
  REQUIRE(f != nullptr);
  return reinterpret_cast<EncodeTiled>(f);
}

// A [rows, cols] 16-bit matrix, row-major with `stride` elements per row, boxes of [box_rows, box_cols].
struct Map2d {
  void* base;
  uint64_t rows, cols, stride;
  uint32_t box_rows, box_cols;
  CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
  CUtensorMapDataType type = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  int element_bytes = 2;

  CUresult encode(CUtensorMap* out) const {
    const cuuint64_t dims[2] = {cols, rows}, strides[1] = {stride * uint64_t(element_bytes)};
    const cuuint32_t box[2] = {box_cols, box_rows}, element_strides[2] = {1, 1};
    return encoder()(out, type, 2, base, dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                     CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  }
};

// CU_TENSOR_MAP_SWIZZLE_128B, from the driver's description ("swizzle 16B chunks within 128B span"):
// in row r of 128 bytes (counted from a 1024-byte boundary), 16-byte chunk c sits at chunk c ^ (r % 8).
size_t swizzled(size_t offset) {
  const size_t row = offset / 128, chunk = offset % 128 / 16;
  return row * 128 + ((chunk ^ (row % 8)) * 16) + offset % 16;
}

float bf16_value(uint16_t bits) {
  const uint32_t u = uint32_t(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The kernels need compute capability 9.0 (sm_90a); the emulator is one.
bool hopper_device() {
  int major = 0, minor = 0;
  REQUIRE(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) == cudaSuccess);
  REQUIRE(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0) == cudaSuccess);
  if (major == 9 && minor == 0) return true;
  WARN("compute capability " << major << "." << minor << ": the Hopper instructions are not tested here");
  return false;
}

}  // namespace

TEST_CASE("cuTensorMapEncodeTiled refuses what its documentation forbids", "[gpu][hopper]") {
  DeviceArray<uint16_t> m(std::vector<uint16_t>(64 * 64));
  CUtensorMap map;
  const Map2d good{m.data, 64, 64, 64, 8, 64};
  CHECK(good.encode(&map) == CUDA_SUCCESS);
  struct Bad {
    const char* why;
    Map2d map;
  };
  const Bad bad[] = {
      {"address not 16-byte aligned", {static_cast<char*>(static_cast<void*>(m.data)) + 2, 8, 64, 64, 8, 64}},
      {"row stride not a multiple of 16 bytes", {m.data, 8, 60, 60, 8, 64}},
      {"box row past the 128-byte swizzle span", {m.data, 8, 64, 128, 8, 128}},
      {"box side above 256", {m.data, 512, 64, 64, 257, 64}},
      {"box row not a multiple of 16 bytes", {m.data, 8, 64, 64, 8, 12}},
      {"zero rows", {m.data, 0, 64, 64, 8, 64}},
  };
  for (const Bad& b : bad) {
    INFO(b.why);
    CHECK(b.map.encode(&map) == CUDA_ERROR_INVALID_VALUE);
  }
  // An unknown symbol is not an error: a null pointer and a status that says so.
  void* f = &map;
  cudaDriverEntryPointQueryResult status{};
  CHECK(cudaGetDriverEntryPointByVersion("cuNoSuchFunction", &f, 12000, cudaEnableDefault, &status) == cudaSuccess);
  CHECK(f == nullptr);
  CHECK(status == cudaDriverEntryPointSymbolNotFound);
}

TEST_CASE("the TMA puts each 16-byte chunk where the 128-byte swizzle says, zeros outside the tensor",
          "[gpu][hopper]") {
  if (!hopper_device()) return;
  const int rows = 20, cols = 100, stride = 104;  // 208-byte rows: a multiple of 16
  std::vector<uint16_t> host(size_t(rows) * stride);
  for (size_t i = 0; i < host.size(); ++i) host[i] = uint16_t(i + 1);  // never 0: zero means "filled"
  DeviceArray<uint16_t> m(host);
  CUtensorMap map;
  REQUIRE((Map2d{m.data, rows, cols, stride, 16, 64}.encode(&map)) == CUDA_SUCCESS);
  const int bytes = 16 * 128;
  DeviceArray<unsigned char> out(std::vector<unsigned char>(bytes, 0));
  // Inside, at the right and bottom edges, and starting before the first column.
  for (auto [x, y] : {std::pair{0, 0}, std::pair{64, 8}, std::pair{-8, -3}}) {
    INFO("box at column " << x << ", row " << y);
    et::tma_tile(map, x, y, out.data, bytes, 0);
    REQUIRE(launch_error() == "");
    const std::vector<unsigned char> got = out.read();
    for (int r = 0; r < 16; ++r)
      for (int c = 0; c < 64; ++c) {
        const int gr = y + r, gc = x + c;
        const bool inside = gr >= 0 && gr < rows && gc >= 0 && gc < cols;
        const uint16_t expected = inside ? host[size_t(gr) * stride + size_t(gc)] : 0;
        uint16_t value;
        std::memcpy(&value, &got[swizzled(size_t(r) * 128 + size_t(c) * 2)], 2);
        INFO("element (" << r << ", " << c << ")");
        REQUIRE(value == expected);
      }
  }
}

TEST_CASE("emulator: a TMA copy breaking a rule fails the launch", "[gpu][hopper][emulator_rules]") {
  if (emulator_only("breaking the TMA's rules")) return;
  const int rows = 20, cols = 100, stride = 104;
  DeviceArray<uint16_t> m(std::vector<uint16_t>(size_t(rows) * stride, 1));
  CUtensorMap map;
  REQUIRE((Map2d{m.data, rows, cols, stride, 16, 64}.encode(&map)) == CUDA_SUCCESS);
  const int bytes = 16 * 128;
  DeviceArray<unsigned char> out(std::vector<unsigned char>(bytes, 0));
  // The PTX ISA: the shared-memory destination of a tensor copy is 128-byte aligned.
  et::tma_tile(map, 0, 0, out.data, bytes, 16);
  CHECK_THAT(launch_error(), Contains("not 128-byte aligned"));
  // The mbarrier's transaction count is the whole box, out-of-bounds elements included: expecting
  // only the in-bounds bytes leaves the phase waiting forever.
  et::tma_tile(map, 64, 8, out.data, 12 * 72, 0);
  CHECK_THAT(launch_error(), Contains("for an mbarrier phase"));
}

TEST_CASE("wgmma multiplies TMA-loaded tiles into the ISA's accumulator fragments", "[gpu][hopper]") {
  if (!hopper_device()) return;
  // A [64, 64], Bᵀ [128, 64], small integers (exact in bf16 and in every f32 sum).
  std::vector<uint16_t> a(64 * 64), bt(128 * 64);
  std::vector<double> av(a.size()), bv(bt.size());
  for (size_t i = 0; i < a.size(); ++i) av[i] = double(int(i * 7 % 13) - 6), a[i] = brigade::bf16(float(av[i])).bits;
  for (size_t i = 0; i < bt.size(); ++i) bv[i] = double(int(i * 5 % 11) - 5), bt[i] = brigade::bf16(float(bv[i])).bits;
  for (size_t i = 0; i < a.size(); ++i) REQUIRE(bf16_value(a[i]) == float(av[i]));
  DeviceArray<uint16_t> da(a), dbt(bt);
  CUtensorMap map_a, map_bt;
  REQUIRE((Map2d{da.data, 64, 64, 64, 64, 64}.encode(&map_a)) == CUDA_SUCCESS);
  REQUIRE((Map2d{dbt.data, 128, 64, 64, 128, 64}.encode(&map_bt)) == CUDA_SUCCESS);
  DeviceArray<float> d(std::vector<float>(64 * 128, -1.0f));
  et::wgmma_tile(map_a, map_bt, d.data, et::WgmmaBug::none);
  REQUIRE(launch_error() == "");
  const std::vector<float> got = d.read();
  for (int i = 0; i < 64; ++i)
    for (int j = 0; j < 128; ++j) {
      double sum = 0;
      for (int p = 0; p < 64; ++p) sum += av[size_t(i * 64 + p)] * bv[size_t(j * 64 + p)];
      INFO("D(" << i << ", " << j << ")");
      REQUIRE(double(got[size_t(i * 128 + j)]) == sum);
    }
}

TEST_CASE("emulator: each wgmma rule, broken, shows", "[gpu][hopper][emulator_rules]") {
  if (emulator_only("breaking wgmma's rules")) return;
  DeviceArray<uint16_t> da(std::vector<uint16_t>(64 * 64, 0x3f80)), dbt(std::vector<uint16_t>(128 * 64, 0x3f80));
  CUtensorMap map_a, map_bt;
  REQUIRE((Map2d{da.data, 64, 64, 64, 64, 64}.encode(&map_a)) == CUDA_SUCCESS);
  REQUIRE((Map2d{dbt.data, 128, 64, 64, 128, 64}.encode(&map_bt)) == CUDA_SUCCESS);
  DeviceArray<float> d(std::vector<float>(64 * 128, 0.0f));
  et::wgmma_tile(map_a, map_bt, d.data, et::WgmmaBug::no_fence);
  CHECK_THAT(launch_error(), Contains("with no wgmma.fence since the thread's start"));
  et::wgmma_tile(map_a, map_bt, d.data, et::WgmmaBug::no_fence_after_wait);
  CHECK_THAT(launch_error(), Contains("since a wait_group handed it accumulators back"));
  et::wgmma_tile(map_a, map_bt, d.data, et::WgmmaBug::unswizzled_descriptor);
  CHECK_THAT(launch_error(), Contains("swizzle mode 0"));
  et::wgmma_tile(map_a, map_bt, d.data, et::WgmmaBug::none, 96);  // three warps: no whole warpgroup
  CHECK_THAT(launch_error(), Contains("a warpgroup needs all 4 of its warps"));
  // Accumulators read between the mma and its wait are undefined: NaN here, whatever they held.
  et::wgmma_tile(map_a, map_bt, d.data, et::WgmmaBug::read_before_wait);
  REQUIRE(launch_error() == "");
  const std::vector<float> got = d.read();
  for (int t = 0; t < 128; ++t) CHECK(std::isnan(got[size_t(t)]));
}
