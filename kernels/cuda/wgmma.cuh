// Hopper's warpgroup matrix multiply (wgmma, sm_90a), the instructions kernels/cuda/gemm_hopper.cu is
// built from, each a thin wrapper over its PTX with the CPU emulator's model of it
// (emulator/wgmma.cpp), as mma.cuh does for mma.sync:
//
//   - wgmma.mma_async.m64n128k16: the 128 threads of a warpgroup multiply A (64 x 16) by B (16 x 128),
//     both read straight from shared memory through 64-bit descriptors, into 64 f32 accumulators per
//     thread. It only starts the work: the accumulators are off limits until a wait retires it.
//   - wgmma.fence: before the first wgmma, and between ordinary register accesses and a wgmma using
//     the same registers; wgmma.commit_group closes a group of the wgmmas issued since the last one;
//     wgmma.wait_group N waits until at most N groups are in flight.
//
// Operands are in the canonical K-major layout with the 128-byte swizzle — exactly what a TMA box of
// 64 16-bit elements per row, 128-byte swizzled and 1024-aligned, leaves in shared memory: row r,
// element k at start + (r % 8) * 128 + (r / 8) * 1024 + 2k, swizzled. Stepping K by 16 inside the
// 128-byte rows is moving the start by 32 bytes.
// wgmma needs sm_90a (the arch-specific target): elsewhere the wrappers are not compiled.
#pragma once

#include <cstdint>
#include <type_traits>
#if BRIGADE_CUDA_EMULATOR
#include <string>
#endif

#include "kernels/cuda/common.cuh"

namespace brigade::cuda {

#if BRIGADE_CUDA_EMULATOR || defined(__CUDA_ARCH_FEAT_SM90_ALL) || !defined(__CUDA_ARCH__)

// The descriptor of a K-major, 128-byte-swizzled operand at shared address `start`: start >> 4 in
// bits 0-13, the leading byte offset (unused by this layout; 1 by convention) in 16-29, the stride
// byte offset 1024 >> 4 (between groups of 8 rows) in 32-45, base offset 0, swizzle mode 1 in 62-63.
__device__ __forceinline__ uint64_t wgmma_descriptor(uint32_t start) {
#if BRIGADE_CUDA_EMULATOR
  // The field holds 18 bits of address: a shared window cannot reach further on a GPU; here an offset
  // that does would be silently cut.
  if (start >= (1u << 18)) ::brigade::emu::kernel_fault("a wgmma descriptor for shared address " + std::to_string(start) + ", past the field's 18 bits");
#endif
  return uint64_t((start & 0x3ffff) >> 4) | uint64_t(1) << 16 | uint64_t(1024 >> 4) << 32 | uint64_t(1) << 62;
}

// Keeps the compiler from moving ordinary arithmetic on the accumulators across a wgmma or a wait:
// its asm statements order memory, not registers (each register becomes an operand of an empty asm).
// Before wgmma_fence and after wgmma_wait_group, as CUTLASS does.
__device__ __forceinline__ void wgmma_fence_operands(float (&d)[64]) {
#if !BRIGADE_CUDA_EMULATOR
#pragma unroll
  for (int i = 0; i < 64; ++i) asm volatile("" : "+f"(d[i])::"memory");
#else
  (void)d;
#endif
}

__device__ __forceinline__ void wgmma_fence() {
#if BRIGADE_CUDA_EMULATOR
  ::brigade::emu::wgmma_fence();
#else
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void wgmma_commit_group() {
#if BRIGADE_CUDA_EMULATOR
  ::brigade::emu::wgmma_commit_group();
#else
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}

template <int Pending>
__device__ __forceinline__ void wgmma_wait_group() {
#if BRIGADE_CUDA_EMULATOR
  ::brigade::emu::wgmma_wait_group(Pending);
#else
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(Pending) : "memory");
#endif
}

// d (64 x 128 f32, the warpgroup's fragments) = A @ B + (accumulate ? d : 0); In is bf16 or f16.
template <class In>
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], uint64_t desc_a, uint64_t desc_b, bool accumulate) {
  static_assert(std::is_same_v<In, bf16> || std::is_same_v<In, f16>, "wgmma takes bf16 or f16 operands");
#if BRIGADE_CUDA_EMULATOR
  ::brigade::emu::wgmma_mma_async(d, 128, desc_a, desc_b, accumulate, std::is_same_v<In, bf16>);
#else
#define BRIGADE_WGMMA_M64N128K16(TYPE)                                                              \
  asm volatile(                                                                                     \
        "{\n"                                                                                       \
        ".reg .pred p;\n"                                                                           \
        "setp.ne.b32 p, %66, 0;\n"                                                                  \
        "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE " "                            \
        "{"                                                                                         \
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, "\
        "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, "\
        "%40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, "\
        "%59, %60, %61, %62, %63"                                                                   \
        "}, %64, %65, p, 1, 1, 0, 0;\n"                                                             \
        "}\n"                                                                                       \
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),\
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),  \
          "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),\
          "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),\
          "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),\
          "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),\
          "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),\
          "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),\
          "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]) \
        : "l"(desc_a), "l"(desc_b), "r"(int(accumulate)))
  if constexpr (std::is_same_v<In, bf16>)
    BRIGADE_WGMMA_M64N128K16("bf16");
  else
    BRIGADE_WGMMA_M64N128K16("f16");
#undef BRIGADE_WGMMA_M64N128K16
#endif
}

#endif

}  // namespace brigade::cuda
