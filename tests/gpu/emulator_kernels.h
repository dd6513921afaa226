// Launchers for tests/gpu/emulator_kernels.cu (the CPU emulator's own tests). Each launches one
// kernel on the default stream; the caller reads cudaGetLastError.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace brigade::emu_test {

void positions(int64_t* out, dim3 grid, dim3 block);
void block_sum(const float* x, float* sums, int blocks);               // 256 threads a block
void shuffles(int* xor_out, int* down_out, int* broadcast_out, int threads);
void divergent_shuffle(int* out);                                      // 32 threads
void shuffle_from_exited_lane(int* out);                               // 32 threads
void write_ones(int* out, int threads);
void vector_load_sums(const float* x, int offset, float* out, int threads);  // x needs 4 * threads + offset

}  // namespace brigade::emu_test
