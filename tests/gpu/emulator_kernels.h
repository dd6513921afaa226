// Launchers for tests/gpu/emulator_kernels.cu (the CPU emulator's own tests). Each launches one
// kernel on the default stream; the caller reads cudaGetLastError.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace brigade::emu_test {

// Whether stream work runs on the workers (not BRIGADE_EMULATOR_STREAMS=sync): what needs work to be
// observably still running checks this.
inline bool asynchronous() {
  const char* mode = std::getenv("BRIGADE_EMULATOR_STREAMS");
  return mode == nullptr || std::string(mode) != "sync";
}

// The calling thread's pending error, with the emulator's text ("" when none).
inline std::string last_error() {
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? "" : std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

void positions(int64_t* out, dim3 grid, dim3 block);
void block_sum(const float* x, float* sums, int blocks);               // 256 threads a block
void shuffles(int* xor_out, int* down_out, int* broadcast_out, int threads);
void divergent_shuffle(int* out);                                      // 32 threads
void shuffle_from_exited_lane(int* out);                               // 32 threads
void write_ones(int* out, int threads);
// Streams (tests/gpu/test_emulator_streams.cpp):
void wait_for_flag(const volatile int* flag, int* out, int value, cudaStream_t stream);  // out[0] = value once *flag
void copy_first(const int* from, int* to, cudaStream_t stream);                           // to[0] = from[0]
void cp_async_groups(const uint32_t* src, uint32_t* out);
void refill_after_read(const uint32_t* src, uint32_t* out, bool barrier);  // out: 32 words  // cp_async_groups_kernel: what a thread reads around cp.async waits
void write_ones_on(int* out, int threads, cudaStream_t stream);
// mbarrier and cp.async.bulk (tests/gpu/test_gpu_emulator.cpp):
void bulk_ring(const float* src, int chunks, float* out);  // 64 threads; out[t] = sum_c src[c * 64 + t]
void bulk_copy_rules(const uint32_t* src, uint32_t* out, bool overdeliver, bool abandon);  // src: 16 words
void mbarrier_rule(const uint32_t* src, int rule);  // src: 16 words; one broken rule each (emulator_kernels.cu)
void vector_load_sums(const float* x, int offset, float* out, int threads);  // x needs 4 * threads + offset

}  // namespace brigade::emu_test
