// The pieces the tensor-core attention kernels (attention_mma_forward.cu, attention_mma_backward.cu)
// share: how a [64, D] tile of 16-bit rows sits in shared memory, how it gets there, and how a warp
// reads mma fragments out of it or turns its f32 accumulators into the next mma's A operand.
//
// Each of the four warps of a block owns 16 rows of the block's 64 (queries, or keys in the grad_k /
// grad_v pass). A 16 x 64 product of two tiles is 8 mma tiles of 16 x 8; its accumulators (acc[n][4],
// lane holding rows lane/4 and lane/4 + 8, columns 2(lane%4) + {0, 1} of each 8-column tile) have
// exactly the layout of an A operand once packed to 16 bits: tiles 2kk and 2kk + 1 are the A
// fragment for k-step kk. That is how P = softmax(S) feeds P V without a trip through memory.
#pragma once

#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/mma.cuh"

namespace brigade::cuda {

constexpr int kMmaThreads = 128;  // 4 warps x 16 rows
constexpr int kMmaRows = 64;      // rows of a block's own tile and of each streamed tile
// The kernels keep scores in base 2: exp(x) = exp2(x log2 e), and exp2 is one MUFU instruction.
constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;

// 2^x as the PTX ISA's ex2.approx.ftz.f32 gives it: one instruction, at most 2 ulp off, and results
// below the smallest normal float flushed to +0 (2^-inf = +0). exp2f spends several more on inputs
// whose result is denormal — never worth it for softmax weights, which are rounded to 16 bits. The
// emulator computes exp2f and flushes the same way.
__device__ __forceinline__ float fast_exp2(float x) {
#if BRIGADE_CUDA_EMULATOR
  const float y = exp2f(x);
  return y < 0x1p-126f ? 0.0f : y;
#else
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#endif
}

// Which head (b H + h) and which of its `blocks` row blocks a thread block works on. A GPU starts
// blocks roughly in index order, so the index runs over the heads fastest and over the row blocks
// from the most work to the least: with a causal mask the last query block sees the most keys (the
// forward and grad_q kernels: last_is_heaviest) and the first key block the most queries (grad_k /
// grad_v). The last wave of blocks is then the short ones, not the long ones.
struct BlockOrder {
  int bh, block;
};
__device__ __forceinline__ BlockOrder heavy_first(int index, int heads, int blocks, bool last_is_heaviest) {
  const int rank = index / heads;  // 0: the heaviest
  return {index % heads, last_is_heaviest ? blocks - 1 - rank : rank};
}

// A tile of `lines` rows of D 16-bit values, D / 8 16-byte chunks per row (8 or 16). ldmatrix reads
// one chunk from each of 8 consecutive rows; XOR-ing the chunk with row % 8 puts those 8 chunks in
// 8 different 16-byte bank groups (a row is 128 or 256 bytes, so unswizzled they would all collide).
template <int D>
struct TileLayout {
  static constexpr int kChunks = D / 8;
  static constexpr int kBytes = kMmaRows * D * 2;

  static __host__ __device__ __forceinline__ uint32_t offset(int line, int chunk) {
    return uint32_t((line * kChunks + (chunk ^ (line & 7))) * 16);
  }
  // The row address lane `lane` gives ldmatrix.x4 for the 16 x 16 block at (row0, col0), loaded as
  // mma expects an A operand (blocks: rows 0-7 / cols 0-7, rows 8-15 / cols 0-7, rows 0-7 / cols
  // 8-15, rows 8-15 / cols 8-15), or a B operand stored [n, k] (registers 0, 2 are n-tile 0's,
  // 1, 3 n-tile 1's).
  static __host__ __device__ __forceinline__ uint32_t rows_fragment(int lane, int row0, int col0) {
    const int block = lane / 8;
    return offset(row0 + (block & 1) * 8 + lane % 8, col0 / 8 + (block >> 1));
  }
  // For a B operand stored [k, n] (k = tile rows, n = head dim) and loaded with .trans: the blocks are
  // k 0-7 / n 0-7, k 0-7 / n 8-15, k 8-15 / n 0-7, k 8-15 / n 8-15, so registers 0, 2 again hold
  // n-tile 0 and 1, 3 n-tile 1.
  static __host__ __device__ __forceinline__ uint32_t trans_fragment(int lane, int k0, int n0) {
    const int block = lane / 8;
    return offset(k0 + (block >> 1) * 8 + lane % 8, n0 / 8 + (block & 1));
  }
};

// Starts copying rows [r0, r0 + Rows) of one head into a tile; rows at or past `limit` are zeroed
// instead, so padding rows hold zeros (never NaN) and add nothing to a product.
template <int D, int Rows = kMmaRows, class T>
__device__ __forceinline__ void load_tile(uint32_t tile, const HeadRows<const T>& src, int b, int h, int r0,
                                          int limit) {
  using L = TileLayout<D>;
  for (int id = int(threadIdx.x); id < Rows * L::kChunks; id += kMmaThreads) {
    const int line = id / L::kChunks, chunk = id % L::kChunks;
    if (r0 + line < limit) {
      cp_async_16(tile + L::offset(line, chunk), src.row(b, h, r0 + line) + chunk * 8);
    } else {
      const uint32_t zeros[4] = {0, 0, 0, 0};
      store_shared_16(tile + L::offset(line, chunk), zeros);
    }
  }
}

// One k-step (head-dim columns [16 kk, 16 kk + 16)) of the product below.
template <class T, int D, int N>
__device__ __forceinline__ void multiply_step(float (&acc)[N][4], const uint32_t (&a)[4], uint32_t tile, int kk) {
  const int lane = int(threadIdx.x) % kWarp;
#pragma unroll
  for (int n = 0; n < N; n += 2) {
    uint32_t r[4];
    ldmatrix_x4<false>(r, tile + TileLayout<D>::rows_fragment(lane, n * 8, kk * 16));
    const uint32_t b0[2] = {r[0], r[2]}, b1[2] = {r[1], r[3]};
    mma_16x8x16<T>(acc[n], a, b0);
    mma_16x8x16<T>(acc[n + 1], a, b1);
  }
}

// acc[n] (16 rows x 8 n columns, n < N) += A (16 x D, fragments a[D / 16]) times the tile's rows
// [0, 8 N) read as Bᵀ: S = Q Kᵀ with K the tile.
template <class T, int D, int N>
__device__ __forceinline__ void multiply_by_rows(float (&acc)[N][4], const uint32_t (&a)[D / 16][4], uint32_t tile) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) multiply_step<T, D>(acc, a[kk], tile, kk);
}

// The same with A read from shared memory (rows a_row0.. of a_tile) one k-step at a time: for an
// operand that would otherwise hold D / 4 registers per lane for the whole kernel.
template <class T, int D, int N>
__device__ __forceinline__ void multiply_by_rows(float (&acc)[N][4], uint32_t a_tile, int a_row0, uint32_t tile) {
  const int lane = int(threadIdx.x) % kWarp;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    uint32_t a[4];
    ldmatrix_x4<false>(a, a_tile + TileLayout<D>::rows_fragment(lane, a_row0, kk * 16));
    multiply_step<T, D>(acc, a, tile, kk);
  }
}

// out (16 x D) += P (16 x 16 K, given as K / 8 f32 accumulator tiles, rounded to T here) times the
// tile's rows [0, 16 K) as a [k, D] matrix: O += P V with V the tile.
template <class T, int D, int K>
__device__ __forceinline__ void multiply_into(float (&out)[D / 8][4], const float (&p)[K / 8][4], uint32_t tile) {
  const int lane = int(threadIdx.x) % kWarp;
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {
    const uint32_t a[4] = {pack_pair<T>(p[2 * kk][0], p[2 * kk][1]), pack_pair<T>(p[2 * kk][2], p[2 * kk][3]),
                           pack_pair<T>(p[2 * kk + 1][0], p[2 * kk + 1][1]),
                           pack_pair<T>(p[2 * kk + 1][2], p[2 * kk + 1][3])};
#pragma unroll
    for (int n = 0; n < D / 8; n += 2) {
      uint32_t r[4];
      ldmatrix_x4<true>(r, tile + TileLayout<D>::trans_fragment(lane, kk * 16, n * 8));
      const uint32_t b0[2] = {r[0], r[2]}, b1[2] = {r[1], r[3]};
      mma_16x8x16<T>(out[n], a, b0);
      mma_16x8x16<T>(out[n + 1], a, b1);
    }
  }
}

// The warp's 16 rows of a tile as A fragments, kept in registers for the whole kernel.
template <int D>
__device__ __forceinline__ void load_a_fragments(uint32_t (&a)[D / 16][4], uint32_t tile, int row0) {
  const int lane = int(threadIdx.x) % kWarp;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) ldmatrix_x4<false>(a[kk], tile + TileLayout<D>::rows_fragment(lane, row0, kk * 16));
}

// Writes the warp's 16 x D accumulators, times row_scale[0] (row lane/4) and row_scale[1] (row
// lane/4 + 8), to rows row0.. of a head; rows at or past `limit` are skipped.
template <class T, int D>
__device__ __forceinline__ void store_rows(const HeadRows<T>& dst, int b, int h, int row0, int limit,
                                           const float (&acc)[D / 8][4], const float (&row_scale)[2]) {
  const int lane = int(threadIdx.x) % kWarp;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = row0 + lane / 4 + half * 8;
    if (row >= limit) continue;
    T* out = dst.row(b, h, row);
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      const int col = n * 8 + 2 * (lane % 4);
      store_pair(out + col, acc[n][2 * half] * row_scale[half], acc[n][2 * half + 1] * row_scale[half], true, true);
    }
  }
}

}  // namespace brigade::cuda
