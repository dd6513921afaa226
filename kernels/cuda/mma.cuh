// The tensor-core building blocks shared by brigade's mma.sync kernels (the GEMM in
// gemm_tensor_core.cu, fused attention in attention_mma_*.cu): thin wrappers over the PTX
// instructions, each with its C++ model under the CPU emulator, and the 16-bit pair store.
//
//   - mma.sync.m16n8k16: one warp multiplies a 16 x 16 piece of A by a 16 x 8 piece of B and adds
//     into a 16 x 8 f32 accumulator, each operand spread over the warp's registers in a fixed
//     pattern (lane l holds, for A, rows l/4 and l/4 + 8, columns 2(l%4) + {0, 1, 8, 9}).
//   - ldmatrix.x4: four 8 x 8 blocks of 16-bit values from shared memory, each lane supplying one
//     16-byte row address, delivered in fragment order; .trans for blocks stored the other way round.
//   - cp.async: global -> shared copies of 16 bytes that run in the background.
#pragma once

#include <cstring>
#include <type_traits>

#include "kernels/cuda/common.cuh"

namespace brigade::cuda {

// Under the CPU emulator (-Dgpu_emulator=true) each one is the emulator's (emulator/) C++ model of the
// same instruction, so the whole kernel around them runs and is checked there too.
__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Copies 16 bytes from global to shared memory in the background; both addresses 16-byte aligned.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src) {
#if BRIGADE_CUDA_EMULATOR
  ::brigade::emu::cp_async_16(dst, src, 16);
#else
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
#endif
}
// An ordinary 16-byte store to shared memory (st.shared.v4), for the chunks cp.async does not copy.
__device__ __forceinline__ void store_shared_16(uint32_t dst, const uint32_t (&v)[4]) {
#if BRIGADE_CUDA_EMULATOR
  ::brigade::emu::store_shared_16(dst, v);
#else
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(dst), "r"(v[0]), "r"(v[1]), "r"(v[2]), "r"(v[3]));
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if BRIGADE_CUDA_EMULATOR
  ::brigade::emu::cp_async_commit();
#else
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
// Waits until at most `Pending` committed groups are still in flight.
template <int Pending>
__device__ __forceinline__ void cp_async_wait() {
#if BRIGADE_CUDA_EMULATOR
  ::brigade::emu::cp_async_wait(Pending);
#else
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending));
#endif
}

template <bool Transpose>
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t address) {
#if BRIGADE_CUDA_EMULATOR
  ::brigade::emu::ldmatrix_x4(r, address, Transpose);
#else
  if constexpr (Transpose)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
#endif
}

// acc (16 x 8, f32) += a (16 x 16) @ b (16 x 8).
template <class In>
__device__ __forceinline__ void mma_16x8x16(float (&acc)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if BRIGADE_CUDA_EMULATOR
  ::brigade::emu::mma_m16n8k16(acc, a, b, std::is_same_v<In, bf16>);
#else
  if constexpr (std::is_same_v<In, bf16>)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// Two values rounded to 16-bit type T and packed into one register, the first in the low half: the
// layout of every 16-bit mma operand register and of a 4-byte pair store.
template <class T>
__device__ __forceinline__ uint32_t pack_pair(float x, float y) {
  return uint32_t(from_compute<T>(x).bits) | uint32_t(from_compute<T>(y).bits) << 16;
}

// Stores (x, y) at dst[0], dst[1] — as one 8- or 4-byte access when allowed — or just x when the
// second column is past the edge.
template <class Out>
__device__ __forceinline__ void store_pair(Out* dst, float x, float y, bool pair_ok, bool second_ok) {
  if (pair_ok && second_ok) {
    if constexpr (std::is_same_v<Out, float>)
      *reinterpret_cast<float2*>(dst) = make_float2(x, y);
    else
      *reinterpret_cast<uint32_t*>(dst) = pack_pair<Out>(x, y);
    return;
  }
  dst[0] = from_compute<Out>(x);
  if (second_ok) dst[1] = from_compute<Out>(y);
}

}  // namespace brigade::cuda
