// Kernels that exercise the emulator's Hopper instructions (tests/gpu/test_gpu_hopper_instructions.cpp): the
// TMA's tile copy and wgmma, each alone, with the layouts the PTX ISA and the driver documentation
// define, and each rule broken once.
#include "tests/gpu/hopper_instruction_kernels.h"

#include "kernels/cuda/bulk_copy.cuh"
#include "kernels/cuda/wgmma.cuh"

namespace brigade::emu_test {
namespace {

using cuda::shared_address;

// The block's dynamic shared memory from its first 1024-byte boundary on.
__device__ unsigned char* aligned_shared() {
  unsigned char* smem = cuda::dynamic_shared_memory();
  return smem + (1024 - shared_address(smem) % 1024) % 1024;
}

// One thread copies the box at (x, y) into shared memory `misalign` bytes past a 1024-byte boundary
// and hands back its raw bytes: where each element landed.
__global__ void tma_tile_kernel(const __grid_constant__ CUtensorMap map, int x, int y, unsigned char* out,
                                int bytes, int misalign) {
  unsigned char* tile = aligned_shared() + misalign;
  __shared__ __align__(8) uint64_t bar;
  const uint32_t b = shared_address(&bar);
  cuda::mbarrier_init(b, 1);
  cuda::mbarrier_arrive_expect_tx(b, uint32_t(bytes));
  cuda::cp_async_bulk_tensor_2d(shared_address(tile), &map, x, y, b);
  cuda::mbarrier_wait(b, 0);
  for (int i = 0; i < bytes; ++i) out[i] = tile[i];
}

// One warpgroup: A [64, 64] and Bᵀ [128, 64] (bf16) by TMA, then D = A @ B with four wgmma
// m64n128k16, each thread writing its fragment where the ISA's layout puts it in D [64, 128].
// `bug` breaks one rule (WgmmaBug).
__global__ void wgmma_tile_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_bt,
                                  float* d, int bug) {
  unsigned char* smem = aligned_shared();
  const uint32_t a = shared_address(smem), bt = a + 64 * 128;  // A: 8 KiB, 1024-aligned; Bᵀ after it
  __shared__ __align__(8) uint64_t bar;
  const uint32_t b = shared_address(&bar);
  if (threadIdx.x == 0) {
    cuda::mbarrier_init(b, 1);
    cuda::mbarrier_arrive_expect_tx(b, 64 * 128 + 128 * 128);
    cuda::cp_async_bulk_tensor_2d(a, &map_a, 0, 0, b);
    cuda::cp_async_bulk_tensor_2d(bt, &map_bt, 0, 0, b);
  }
  __syncthreads();
  cuda::mbarrier_wait(b, 0);
  float acc[64] = {};
  if (bug != int(WgmmaBug::no_fence)) cuda::wgmma_fence();
  for (int kk = 0; kk < 4; ++kk) {
    uint64_t da = cuda::wgmma_descriptor(a + 32 * kk);
    if (bug == int(WgmmaBug::unswizzled_descriptor)) da &= ~(uint64_t(3) << 62);
    cuda::wgmma_m64n128k16<bf16>(acc, da, cuda::wgmma_descriptor(bt + 32 * kk), kk > 0);
  }
  cuda::wgmma_commit_group();
  const int t = int(threadIdx.x), warp = t / 32, lane = t % 32;
  if (bug == int(WgmmaBug::read_before_wait)) d[t] = acc[0];
  cuda::wgmma_wait_group<0>();
  if (bug == int(WgmmaBug::read_before_wait)) return;
  if (bug == int(WgmmaBug::no_fence_after_wait)) {  // the accumulators are back: a fence is due first
    cuda::wgmma_m64n128k16<bf16>(acc, cuda::wgmma_descriptor(a), cuda::wgmma_descriptor(bt), true);
    cuda::wgmma_commit_group();
    cuda::wgmma_wait_group<0>();
  }
  for (int j = 0; j < 16; ++j)
    for (int i = 0; i < 4; ++i) {
      const int row = 16 * warp + lane / 4 + (i >= 2 ? 8 : 0), col = 8 * j + 2 * (lane % 4) + i % 2;
      d[row * 128 + col] = acc[4 * j + i];
    }
}

}  // namespace

void tma_tile(const CUtensorMap& map, int x, int y, unsigned char* out, int bytes, int misalign) {
  tma_tile_kernel<<<1, 1, size_t(bytes) + 2048>>>(map, x, y, out, bytes, misalign);
}

void wgmma_tile(const CUtensorMap& map_a, const CUtensorMap& map_bt, float* d, WgmmaBug bug, int threads) {
  wgmma_tile_kernel<<<1, threads, 64 * 128 + 128 * 128 + 1024>>>(map_a, map_bt, d, int(bug));
}

}  // namespace brigade::emu_test
