// The Hopper GEMM (sm_90a): TMA loads, wgmma, warp specialisation, persistent tiles.
//
// C [m, n] = A [m, k] @ B [k, n] for bf16/f16 inputs with f32 accumulation, when both operands are
// K-major (A's rows and Bᵀ's rows contiguous along k: a linear layer's x @ Wᵀ). One block of 384
// threads is three warpgroups with different jobs:
//
//   producer (warpgroup 2)     one thread issues TMA copies: for each 64-deep slice of K, the
//                              128 x 64 tile of A and the 128 x 64 tile of Bᵀ, into a ring of
//                              kStages shared-memory buffers; the copy signals the buffer's `full`
//                              mbarrier with its bytes (complete_tx).
//   consumers (warpgroups 0, 1) wait for a buffer to be full, multiply their 64 rows of A by the
//                              128 columns (4 wgmma m64n128k16 along the slice's K), and release the
//                              buffer (`empty` mbarrier) once the wgmmas that read it have retired —
//                              one group later, so one group of wgmmas is always in flight.
//
// No thread ever waits for a load it could have overlapped: while the consumers multiply slice i, the
// producer is already filling slices i+1 .. i+kStages-1. Persistent: the grid is at most one block per
// SM, and each block walks output tiles blockIdx.x, + gridDim.x, ...; the ring's stage and phase run
// on across tiles, so the next tile's loads start during this tile's epilogue.
//
// Shared-memory layout per stage: A tile (128 rows x 128 bytes = 16 KiB) then Bᵀ tile (16 KiB), each
// 1024-aligned and 128-byte swizzled by the TMA — the canonical layout wgmma reads (wgmma.cuh). Edges
// need no special code: the TMA fills rows and columns past the matrix with zeros, and the epilogue
// stores only what lies inside C. The epilogue (bias, GELU, pre) is epilogue.cuh's, as in the mma.sync
// GEMM, so both tensor-core paths round identically.
//
// The emulator runs this kernel too (emulator/tensor_maps.cpp, wgmma.cpp): copies land as
// late as possible, wgmma reads shared memory only at its wait, accumulators are NaN in between — so
// a missing wait or an early release shows up as wrong results in tests/gpu.
#include "kernels/cuda/bulk_copy.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/epilogue.cuh"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/tensor_map.h"
#include "kernels/cuda/wgmma.cuh"

#include <atomic>
#include <climits>

namespace brigade::cuda {
namespace {

constexpr int kTileM = 128, kTileN = 128, kTileK = 64;  // a K slice is 64 16-bit elements: 128 bytes
constexpr int kStages = 4;
constexpr int kConsumers = 2;                            // warpgroups that multiply, 64 rows each
constexpr int kThreads = 128 * (kConsumers + 1);         // plus one that loads
constexpr uint32_t kTileBytes = kTileM * kTileK * 2;     // one operand's tile: 16 KiB
constexpr uint32_t kStageBytes = 2 * kTileBytes;
// The ring, 2 x kStages mbarriers, and slack to align the start to 1024 bytes.
constexpr size_t kSharedBytes = kStages * kStageBytes + 2 * kStages * 8 + 1024;

// Whether this pass has the kernel's body: the sm_90a pass (and the emulator); with gpu_arch 80,90 nvcc
// also compiles an empty kernel for sm_80, never launched (hopper_gemm_available).
#if BRIGADE_CUDA_EMULATOR || defined(__CUDA_ARCH_FEAT_SM90_ALL) || !defined(__CUDA_ARCH__)
#define BRIGADE_HOPPER_KERNEL_BODY 1
#endif

template <class In, class Out>
__global__ void __launch_bounds__(kThreads)
    gemm_hopper_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_bt, Out* c,
                       int64_t ldc, bool pair_stores, int m, int n, int k, Epilogue<Out> epilogue) {
#if defined(BRIGADE_HOPPER_KERNEL_BODY)
  unsigned char* smem = dynamic_shared_memory();
  smem += (1024 - shared_address(smem) % 1024) % 1024;  // the swizzle pattern starts on 1024 bytes
  const uint32_t ring = shared_address(smem);
  const uint32_t full = ring + kStages * kStageBytes, empty = full + kStages * 8;  // mbarriers, by stage
  const int warpgroup = int(threadIdx.x) / 128;
  const int tiles_m = (m + kTileM - 1) / kTileM, tiles_n = (n + kTileN - 1) / kTileN;
  const int tiles = tiles_m * tiles_n, slices = (k + kTileK - 1) / kTileK;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(full + 8 * s, 1);                       // the producer's arrive; the bytes are tx
      mbarrier_init(empty + 8 * s, kConsumers * 128);       // every consumer thread, after its wait
    }
  }
  __syncthreads();

  // Tiles go down a column of tile-rows first, so blocks running together share Bᵀ tiles in L2.
  auto tile_origin = [&](int tile, int& row0, int& col0) {
    row0 = (tile % tiles_m) * kTileM;
    col0 = (tile / tiles_m) * kTileN;
  };

  if (warpgroup == kConsumers) {  // the producer
    if (threadIdx.x % 128 != 0) return;
    int stage = 0;
    uint32_t phase = 0;
    for (int tile = int(blockIdx.x); tile < tiles; tile += int(gridDim.x)) {
      int row0, col0;
      tile_origin(tile, row0, col0);
      for (int s = 0; s < slices; ++s) {
        mbarrier_wait(empty + 8 * stage, phase ^ 1);  // the buffer's last readers are done (round 0: free)
        const uint32_t buffer = ring + stage * kStageBytes;
        mbarrier_arrive_expect_tx(full + 8 * stage, kStageBytes);
        cp_async_bulk_tensor_2d(buffer, &map_a, s * kTileK, row0, full + 8 * stage);
        cp_async_bulk_tensor_2d(buffer + kTileBytes, &map_bt, s * kTileK, col0, full + 8 * stage);
        if (++stage == kStages) stage = 0, phase ^= 1;
      }
    }
    return;
  }

  // A consumer: 64 rows x 128 columns of each tile.
  float acc[64] = {};
  int stage = 0;
  uint32_t phase = 0;
  const int t = int(threadIdx.x) % 128, warp = t / 32, lane = t % 32;
  for (int tile = int(blockIdx.x); tile < tiles; tile += int(gridDim.x)) {
    int row0, col0;
    tile_origin(tile, row0, col0);
    int previous = -1;  // the stage whose wgmmas are still in flight
    for (int s = 0; s < slices; ++s) {
      mbarrier_wait(full + 8 * stage, phase);
      const uint32_t a = ring + stage * kStageBytes + uint32_t(warpgroup) * 64 * 128;  // this warpgroup's rows
      const uint32_t bt = ring + stage * kStageBytes + kTileBytes;
      wgmma_fence_operands(acc);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kTileK / 16; ++kk)  // 16 deep each: 32 bytes further along the rows
        wgmma_m64n128k16<In>(acc, wgmma_descriptor(a + 32 * kk), wgmma_descriptor(bt + 32 * kk), s > 0 || kk > 0);
      wgmma_commit_group();
      wgmma_wait_group<1>();  // the previous slice's wgmmas have read their buffer: release it
      wgmma_fence_operands(acc);
      if (previous >= 0) mbarrier_arrive_expect_tx(empty + 8 * previous, 0);
      previous = stage;
      if (++stage == kStages) stage = 0, phase ^= 1;
    }
    wgmma_wait_group<0>();
    wgmma_fence_operands(acc);
    if (previous >= 0) mbarrier_arrive_expect_tx(empty + 8 * previous, 0);

    // The accumulator fragment: for column block j, rows 16 warp + lane/4 (+8), columns 8j + 2(lane%4) (+1).
    const int row_base = row0 + warpgroup * 64 + 16 * warp + lane / 4;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const int col = col0 + 8 * j + 2 * (lane % 4);
      if (col >= n) continue;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = row_base + 8 * h;
        if (row >= m) continue;
        const int64_t at = int64_t(row) * ldc + col;
        store_accumulator_pair(epilogue, c, epilogue.pre, at, col, acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1],
                               pair_stores, col + 1 < n);
      }
    }
  }
#endif
}

template <class In, class Out>
void launch(const GemmProblem& p, cudaStream_t stream, int max_blocks) {
  // Bᵀ [n, k]: B's column j is row j of Bᵀ, contiguous along k (B's row stride is 1).
  const CUtensorMap map_a = make_tensor_map_2d("matmul (hopper) A", p.a.data, p.in, p.m, p.k, p.a.row_stride, kTileM, kTileK);
  const CUtensorMap map_bt = make_tensor_map_2d("matmul (hopper) Bᵀ", p.b.data, p.in, p.n, p.k, p.b.col_stride, kTileN, kTileK);
  const Epilogue<Out> e = epilogue_of<Out>(p.epilogue);
  const bool pair_stores = (p.m == 1 || p.c.row_stride % 2 == 0) &&
                           reinterpret_cast<uintptr_t>(p.c.data) % (2 * sizeof(Out)) == 0 &&
                           reinterpret_cast<uintptr_t>(p.epilogue.pre) % (2 * sizeof(Out)) == 0;
  const int64_t tiles = ((p.m + kTileM - 1) / kTileM) * ((p.n + kTileN - 1) / kTileN);
  int device = 0;
  BRIGADE_CUDA_CHECK(cudaGetDevice(&device));
  const int blocks = max_blocks > 0 ? max_blocks : sm_count(Device::cuda(device));
  const int grid = int(std::min<int64_t>(tiles, blocks));
  auto kernel = gemm_hopper_kernel<In, Out>;
  // More than 48 KiB of dynamic shared memory is opt-in, per kernel and device: once each.
  constexpr int kMaxDevices = 64;
  static std::atomic<bool> opted_in[kMaxDevices] = {};
  if (device < 0 || device >= kMaxDevices || !opted_in[device].load(std::memory_order_acquire)) {
    BRIGADE_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                                            cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSharedBytes)));
    if (device >= 0 && device < kMaxDevices) opted_in[device].store(true, std::memory_order_release);
  }
  kernel<<<grid, kThreads, kSharedBytes, stream>>>(map_a, map_bt, static_cast<Out*>(p.c.data), p.c.row_stride,
                                                   pair_stores, int(p.m), int(p.n), int(p.k), e);
  BRIGADE_CUDA_CHECK_LAUNCH();
}

}  // namespace

bool hopper_gemm_available() {
#if BRIGADE_CUDA_EMULATOR
  return true;
#else
  int device = 0, major = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) return false;
  int minor = 0;
  if (cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) return false;
  return major == 9 && minor == 0 && BRIGADE_HOPPER_COMPILED;  // an sm_90a binary runs on 9.0 only
#endif
}

bool hopper_can_read(const GemmProblem& p) {
  return (p.in == DType::bf16 || p.in == DType::f16) && p.batch == 1 && (p.a.col_stride == 1 || p.k == 1) &&
         (p.b.row_stride == 1 || p.k == 1) && tensor_map_can_describe(p.a.data, p.in, p.m, p.k, p.a.row_stride) &&
         tensor_map_can_describe(p.b.data, p.in, p.n, p.k, p.b.col_stride);
}

void gemm_hopper(const GemmProblem& p, cudaStream_t stream, int max_blocks) {
  BRIGADE_CHECK(hopper_gemm_available(), "matmul (hopper): needs an sm_90 GPU (H100/H200) and a build for gpu_arch 90");
  BRIGADE_CHECK(hopper_can_read(p), "matmul (hopper): needs bf16/f16 operands of one product, both contiguous along k ",
                "with 16-byte aligned rows; got ", dtype_name(p.in), " [", p.m, ", ", p.k, "] @ [", p.k, ", ", p.n,
                "], batch ", p.batch);
  BRIGADE_CHECK(p.m > 0 && p.n > 0 && p.k > 0 && p.m <= INT_MAX && p.n <= INT_MAX && p.k <= INT_MAX,
                "matmul (hopper): problem [", p.m, ", ", p.k, "] @ [", p.k, ", ", p.n,
                "] must have every size from 1 to 2^31 - 1 (matmul handles empty products itself)");
  const bool wide_out = p.out == DType::f32;
  if (p.in == DType::bf16)
    return wide_out ? launch<bf16, float>(p, stream, max_blocks) : launch<bf16, bf16>(p, stream, max_blocks);
  return wide_out ? launch<f16, float>(p, stream, max_blocks) : launch<f16, f16>(p, stream, max_blocks);
}

}  // namespace brigade::cuda
