// Small kernels that exercise the CPU emulator itself (tests/gpu/test_gpu_emulator.cpp): what it
// must run exactly as a GPU does, and the bugs it must refuse. Built only with -Dgpu_emulator=true,
// through scripts/cuda_emulate.py like every other .cu file of that build.
#include "tests/gpu/emulator_kernels.h"

#include "kernels/cuda/bulk_copy.cuh"
#include "kernels/cuda/mma.cuh"

namespace brigade::emu_test {
namespace {

// Every thread of a 3-D grid of 3-D blocks writes its global linear id at that position.
__global__ void positions_kernel(int64_t* out) {
  const int64_t block = blockIdx.x + int64_t(gridDim.x) * (blockIdx.y + int64_t(gridDim.y) * blockIdx.z);
  const int64_t thread = threadIdx.x + int64_t(blockDim.x) * (threadIdx.y + int64_t(blockDim.y) * threadIdx.z);
  const int64_t threads_per_block = int64_t(blockDim.x) * blockDim.y * blockDim.z;
  out[block * threads_per_block + thread] = block * threads_per_block + thread;
}

// A block sum through shared memory: the tree halves the active threads at each __syncthreads.
__global__ void block_sum_kernel(const float* x, float* sums) {
  __shared__ float partial[256];
  partial[threadIdx.x] = x[blockIdx.x * blockDim.x + threadIdx.x];
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) sums[blockIdx.x] = partial[0];
}

// Each lane reports what three shuffles hand it.
__global__ void shuffles_kernel(int* xor_out, int* down_out, int* broadcast_out) {
  const int lane = int(threadIdx.x % 32), i = int(threadIdx.x);
  xor_out[i] = __shfl_xor_sync(0xffffffffu, lane * 10, 5);
  down_out[i] = __shfl_down_sync(0xffffffffu, lane * 10, 3);
  broadcast_out[i] = __shfl_sync(0xffffffffu, lane * 10, 7);
}

// Bug: half a warp shuffles while the other half waits at __syncthreads.
__global__ void divergent_shuffle_kernel(int* out) {
  int v = int(threadIdx.x);
  if (threadIdx.x < 16) v = __shfl_xor_sync(0xffffffffu, v, 1);
  __syncthreads();
  out[threadIdx.x] = v;
}

// Bug: lanes 0-15 read lanes 16-31, which have already returned.
__global__ void shuffle_from_exited_lane_kernel(int* out) {
  if (threadIdx.x >= 16) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, int(threadIdx.x), 16);
}

__global__ void write_kernel(int* out) { out[threadIdx.x] = 1; }

// Thread i reads the 4 floats from x + offset + 4i as one 16-byte load: a bug unless x + offset is
// 16-byte aligned.
__global__ void vector_load_kernel(const float* x, int offset, float* out) {
  const float4 v = *reinterpret_cast<const float4*>(x + offset + 4 * threadIdx.x);
  out[threadIdx.x] = v.x + v.y + v.z + v.w;
}

// Waits (a bounded spin) until the host sets *flag, then writes `value` to out[0]: work that is still
// running when the host looks, to see what runs asynchronously and what waits for it.
__global__ void wait_for_flag_kernel(const volatile int* flag, int* out, int value) {
  for (long spins = 0; *flag == 0 && spins < 4000000000L; ++spins) {
  }
  out[0] = value;
}

__global__ void copy_first_kernel(const int* from, int* to) { to[0] = from[0]; }

// One thread, two cp.async groups of 16 bytes (src[0..3], then src[4..7]) into shared memory, and
// what it reads of them: before any wait, after wait_group 1 (the first group only is complete), and
// after wait_group 0. out[0..3] = tile[0] before, tile[0] and tile[4] after the first wait, tile[4]
// after the second.
__global__ void cp_async_groups_kernel(const uint32_t* src, uint32_t* out) {
  __shared__ __align__(16) uint32_t tile[8];
  const uint32_t base = cuda::shared_address(tile);
  cuda::cp_async_16(base, src);
  cuda::cp_async_commit();
  cuda::cp_async_16(base + 16, src + 4);
  cuda::cp_async_commit();
  out[0] = tile[0];
  cuda::cp_async_wait<1>();
  out[1] = tile[0];
  out[2] = tile[4];
  cuda::cp_async_wait<0>();
  out[3] = tile[4];
}

// Warp 1 reads 32 rows of 16 bytes with ldmatrix; then thread 0 (warp 0) refills row 0 with cp.async,
// after a __syncthreads when `barrier`, else straight away: a race on a GPU.
__global__ void refill_after_read_kernel(const uint32_t* src, uint32_t* out, bool barrier) {
  __shared__ __align__(16) uint32_t tile[32 * 4];
  const uint32_t base = cuda::shared_address(tile);
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  if (threadIdx.x == 0) {
    const uint32_t zeros[4] = {0, 0, 0, 0};
    for (int row = 0; row < 32; ++row) cuda::store_shared_16(base + 16 * row, zeros);
  }
  __syncthreads();
  if (warp == 1) {
    uint32_t r[4];
    cuda::ldmatrix_x4<false>(r, base + 16 * lane);
    out[lane] = r[0];
  }
  if (barrier) __syncthreads();
  if (threadIdx.x == 0) {
    cuda::cp_async_16(base, src);
    cuda::cp_async_commit();
    cuda::cp_async_wait<0>();
  }
}

// A two-stage ring fed by bulk copies, as a TMA pipeline is: thread 0 copies chunk c + 1 (64 floats)
// into one stage while all 64 threads read chunk c from the other, each stage's mbarrier counting
// one arrival (thread 0's expect-tx) plus the copy's bytes; a __syncthreads hands a read stage back
// for its refill. out[t] = sum over chunks of src[c * 64 + t].
__global__ void bulk_ring_kernel(const float* src, int chunks, float* out) {
  __shared__ __align__(16) float stage[2][64];
  __shared__ __align__(8) uint64_t full[2];
  const int t = int(threadIdx.x);
  auto issue = [&](int c) {
    const uint32_t bar = cuda::shared_address(&full[c % 2]);
    cuda::mbarrier_arrive_expect_tx(bar, 64 * sizeof(float));
    cuda::cp_async_bulk(cuda::shared_address(stage[c % 2]), src + c * 64, 64 * sizeof(float), bar);
  };
  if (t == 0) {
    cuda::mbarrier_init(cuda::shared_address(&full[0]), 1);
    cuda::mbarrier_init(cuda::shared_address(&full[1]), 1);
  }
  __syncthreads();
  if (t == 0) issue(0);
  float acc = 0;
  for (int c = 0; c < chunks; ++c) {
    if (t == 0 && c + 1 < chunks) issue(c + 1);  // its stage was read at c - 1, before the last barrier
    cuda::mbarrier_wait(cuda::shared_address(&full[c % 2]), uint32_t(c / 2 % 2));  // that stage's (c/2)-th phase
    acc += stage[c % 2][t];
    __syncthreads();
  }
  out[t] = acc;
}

// One thread: a bulk copy of 16 words, what it reads of word 0 before the barrier's phase completes
// and after; then (when `overdeliver`) a phase that expects fewer bytes than its copy brings, or
// (when `abandon`) a copy the block never waits for.
__global__ void bulk_copy_rules_kernel(const uint32_t* src, uint32_t* out, bool overdeliver, bool abandon) {
  __shared__ __align__(16) uint32_t buf[16];
  __shared__ __align__(8) uint64_t bar;
  const uint32_t b = cuda::shared_address(&bar), d = cuda::shared_address(buf);
  cuda::mbarrier_init(b, 1);
  cuda::mbarrier_arrive_expect_tx(b, overdeliver ? 32 : 64);
  cuda::cp_async_bulk(d, src, 64, b);
  out[0] = buf[0];
  if (abandon) return;
  cuda::mbarrier_wait(b, 0);
  out[1] = buf[0];
}

// One broken rule of mbarrier or cp.async.bulk per `rule` (see MbarrierRule); 2 threads.
__global__ void mbarrier_rule_kernel(const uint32_t* src, int rule) {
  __shared__ __align__(16) uint32_t buf[16];
  __shared__ __align__(16) uint64_t bars[2];
  const uint32_t b = cuda::shared_address(&bars[0]), d = cuda::shared_address(buf);
  const bool first = threadIdx.x == 0;
  switch (rule) {
    case 0:  // a wait on shared memory no mbarrier.init has made a barrier
      if (first) cuda::mbarrier_wait(b, 0);
      return;
    case 1:  // a count of 0
      if (first) cuda::mbarrier_init(b, 0);
      return;
    case 2:  // a barrier that is not 8-byte aligned
      if (first) cuda::mbarrier_init(b + 4, 1);
      return;
    case 3:  // the other thread uses the barrier before a __syncthreads makes the init visible
      if (first) cuda::mbarrier_init(b, 2);
      if (!first) cuda::mbarrier_arrive_expect_tx(b, 0);
      return;
  }
  if (first) cuda::mbarrier_init(b, 1);
  __syncthreads();
  if (!first) return;
  switch (rule) {
    case 4:  // a size that is not a multiple of 16
      cuda::mbarrier_arrive_expect_tx(b, 24);
      cuda::cp_async_bulk(d, src, 24, b);
      break;
    case 5:  // a destination that is not 16-byte aligned
      cuda::mbarrier_arrive_expect_tx(b, 16);
      cuda::cp_async_bulk(d + 8, src, 16, b);
      break;
    case 6:  // a source reaching past its allocation (16 words)
      cuda::mbarrier_arrive_expect_tx(b, 64);
      cuda::cp_async_bulk(d, src + 4, 64, b);
      break;
    case 7:  // more arrivals than the count, while the phase waits for its bytes
      cuda::mbarrier_arrive_expect_tx(b, 64);
      cuda::mbarrier_arrive_expect_tx(b, 0);
      break;
    case 8:  // a phase parity that is neither 0 nor 1
      cuda::mbarrier_wait(b, 2);
      break;
    case 9:  // a tx-count past the ISA's range
      cuda::mbarrier_arrive_expect_tx(b, 1u << 21);
      break;
    case 10:  // a copy over the barrier's own bytes
      cuda::mbarrier_arrive_expect_tx(b, 16);
      cuda::cp_async_bulk(b, src, 16, b);
      break;
    case 11: {  // a copy for the barrier's next phase issued before this one completes: copies may
                // land in any order, so the later one can complete this phase with the earlier's data
                // still in flight
      cuda::mbarrier_arrive_expect_tx(b, 32);
      cuda::cp_async_bulk(d, src, 32, b);       // this phase's bytes
      cuda::cp_async_bulk(d + 32, src, 32, b);  // meant for the next phase
      cuda::mbarrier_wait(b, 0);
      if (buf[0] == 0xffffffffu) __trap();  // read this phase's data: poison when the later copy won
      cuda::mbarrier_arrive_expect_tx(b, 32);
      cuda::mbarrier_wait(b, 1);
      break;
    }
  }
}

}  // namespace

void bulk_ring(const float* src, int chunks, float* out) { bulk_ring_kernel<<<1, 64>>>(src, chunks, out); }
void bulk_copy_rules(const uint32_t* src, uint32_t* out, bool overdeliver, bool abandon) {
  bulk_copy_rules_kernel<<<1, 1>>>(src, out, overdeliver, abandon);
}
void mbarrier_rule(const uint32_t* src, int rule) { mbarrier_rule_kernel<<<1, 2>>>(src, rule); }

void refill_after_read(const uint32_t* src, uint32_t* out, bool barrier) {
  refill_after_read_kernel<<<1, 64>>>(src, out, barrier);
}
void wait_for_flag(const volatile int* flag, int* out, int value, cudaStream_t stream) {
  wait_for_flag_kernel<<<1, 1, 0, stream>>>(flag, out, value);
}
void copy_first(const int* from, int* to, cudaStream_t stream) { copy_first_kernel<<<1, 1, 0, stream>>>(from, to); }
void cp_async_groups(const uint32_t* src, uint32_t* out) { cp_async_groups_kernel<<<1, 1>>>(src, out); }
void write_ones_on(int* out, int threads, cudaStream_t stream) { write_kernel<<<1, threads, 0, stream>>>(out); }

void positions(int64_t* out, dim3 grid, dim3 block) { positions_kernel<<<grid, block>>>(out); }
void block_sum(const float* x, float* sums, int blocks) { block_sum_kernel<<<blocks, 256>>>(x, sums); }
void shuffles(int* xor_out, int* down_out, int* broadcast_out, int threads) {
  shuffles_kernel<<<1, threads>>>(xor_out, down_out, broadcast_out);
}
void divergent_shuffle(int* out) { divergent_shuffle_kernel<<<1, 32>>>(out); }
void shuffle_from_exited_lane(int* out) { shuffle_from_exited_lane_kernel<<<1, 32>>>(out); }
void write_ones(int* out, int threads) { write_kernel<<<1, threads>>>(out); }
void vector_load_sums(const float* x, int offset, float* out, int threads) {
  vector_load_kernel<<<1, threads>>>(x, offset, out);
}

}  // namespace brigade::emu_test
