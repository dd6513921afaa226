// Hopper's asynchronous bulk copies and the barriers that track them: the building blocks of a TMA
// pipeline (sm_90), each a thin wrapper over its PTX instruction with the CPU emulator's model of it
// (emulator/async_copies.cpp), as mma.cuh does for mma.sync.
//
//   - An mbarrier is a 64-bit object in shared memory that counts arrivals per phase: mbarrier.init
//     sets how many each phase needs; a phase completes when that many threads have arrived AND its
//     transaction count is back to zero, then the next phase begins (its parity flips).
//   - arrive.expect_tx arrives and announces bytes an asynchronous copy will deliver; the copy's
//     complete_tx takes them off when it lands (in either order).
//   - cp.async.bulk copies a contiguous block (a multiple of 16 bytes, 16-byte aligned) from global
//     to shared memory in the background — no thread's registers involved — and signals complete_tx
//     on the mbarrier named in the instruction.
//   - try_wait.parity waits until the phase of the given parity has completed: a consumer waits for
//     parity 0, 1, 0, ... as it goes round a ring of buffers.
// These need sm_90: on older GPUs they are not compiled, and a caller must guard its own use.
// Between ordinary reads of a buffer and a bulk copy that refills it (generic proxy, then async
// proxy), the PTX memory model asks for a proxy fence (fence.proxy.async.shared::cta) besides the
// barrier that orders them; the emulator does not check that.
#pragma once

#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/mma.cuh"  // shared_address

namespace brigade::cuda {

#if BRIGADE_CUDA_EMULATOR || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900) || !defined(__CUDA_ARCH__)

// Makes the mbarrier at shared address `bar` (8-byte aligned) expect `count` arrivals per phase. The
// threads that use it must see the init first: a __syncthreads after it.
__device__ __forceinline__ void mbarrier_init(uint32_t bar, uint32_t count) {
#if BRIGADE_CUDA_EMULATOR
  ::brigade::emu::mbarrier_init(bar, count);
#else
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
  // The copies are issued by the async proxy: make the initialised barrier visible to it.
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// Arrives on the barrier, announcing `bytes` still to come from bulk copies (0: a plain arrive).
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
#if BRIGADE_CUDA_EMULATOR
  ::brigade::emu::mbarrier_arrive_expect_tx(bar, bytes);
#else
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
#endif
}

// Returns once the phase of parity `parity` (0 or 1) has completed.
__device__ __forceinline__ void mbarrier_wait(uint32_t bar, uint32_t parity) {
#if BRIGADE_CUDA_EMULATOR
  ::brigade::emu::mbarrier_try_wait_parity(bar, parity);
#else
  uint32_t done = 0;
  while (!done) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n"
        "}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  }
#endif
}

// Copies `bytes` (a multiple of 16; both addresses 16-byte aligned) from global `src` to shared `dst`
// in the background; when they have landed, complete_tx(bytes) on the mbarrier `bar`.
__device__ __forceinline__ void cp_async_bulk(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
#if BRIGADE_CUDA_EMULATOR
  ::brigade::emu::cp_async_bulk_to_shared(dst, src, bytes, bar);
#else
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
#endif
}

// The TMA's tile copy: the box of the 2-D tensor map `map` (a __grid_constant__ kernel parameter,
// made by make_tensor_map_2d in kernels/cuda/tensor_map.h) whose first element is at column x, row
// y, into shared `dst` (128-byte aligned; 1024 for the 128-byte swizzle to start at row 0), laid out
// row after row and swizzled as the map says. Elements outside the tensor arrive as zeros, and the
// whole box's bytes count towards complete_tx on `bar`.
__device__ __forceinline__ void cp_async_bulk_tensor_2d(uint32_t dst, const void* map, int x, int y, uint32_t bar) {
#if BRIGADE_CUDA_EMULATOR
  const int32_t coords[2] = {x, y};
  ::brigade::emu::cp_async_bulk_tensor_to_shared(dst, map, coords, 2, bar);
#else
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
      "l"(map), "r"(x), "r"(y), "r"(bar)
      : "memory");
#endif
}

#endif

}  // namespace brigade::cuda
