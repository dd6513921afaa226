// Launchers for tests/gpu/hopper_instruction_kernels.cu (the emulator's TMA and wgmma). Each launches one
// kernel on the default stream; the caller reads cudaGetLastError.
#pragma once

#include <cuda.h>

namespace brigade::emu_test {

// Copies the box of `map` at column x, row y into shared memory `misalign` bytes past a 1024-byte
// boundary, then its `bytes` raw bytes to out.
void tma_tile(const CUtensorMap& map, int x, int y, unsigned char* out, int bytes, int misalign);

enum class WgmmaBug { none, no_fence, no_fence_after_wait, read_before_wait, unswizzled_descriptor };
// d [64, 128] = A [64, 64] @ (Bᵀ [128, 64])ᵀ in bf16 via TMA and wgmma, by `threads` threads (128: one
// warpgroup); with `bug`, one rule broken (read_before_wait: d[t] = thread t's first accumulator
// between the mma and its wait).
void wgmma_tile(const CUtensorMap& map_a, const CUtensorMap& map_bt, float* d, WgmmaBug bug, int threads = 128);

}  // namespace brigade::emu_test
