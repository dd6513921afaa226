// Fused attention forward on tensor cores (bf16, f16; head dim 64 or 128), FlashAttention-2's
// scheme: one block of 4 warps per (batch, head, 64 queries), each warp owning 16 queries whose
// q fragments stay in registers. Keys and values stream through shared memory 64 rows at a time:
//
//   S = scale Q Kᵀ       (mma, f32 accumulators: 16 x 64 per warp)
//   mask; m_new = max(m, rowmax S); P = exp(S - m_new)       — the online softmax:
//   l = l exp(m - m_new) + rowsum P;  O = O exp(m - m_new)   (rescale what was summed so far)
//   O += (P o Z) V       (P rounded to bf16/f16 in registers: the accumulators already are the A
//                         operand's layout; Z is dropout's keep factor, applied after l, which
//                         therefore excludes dropout as the contract says)
//
// and at the end y = O / l, lse = m + log l. A row's max and sum live in the 4 lanes holding it
// (lane / 4 picks the row); each lane keeps a partial sum over its columns, combined once at the end.
//
// What makes it fast (measured on an H200, bench/results/h200-gpt2-2026-11-26.md):
//   - the scores are kept in base 2 (scale log2(e) folded into one multiply), so each weight costs
//     one exp2 (the MUFU unit's instruction) instead of expf's range reduction;
//   - K and V each have one shared buffer, refilled as soon as the last warp is done with it: the
//     next K lands while this tile's softmax and P V run, the next V while the next S = Q Kᵀ runs;
//   - a kernel without dropout has no Philox code in it (registers are what it runs short of);
//   - with a causal mask the last query blocks see the most keys, so they are launched first and
//     the last wave of blocks is the short ones.
#include "kernels/cuda/attention_mma.cuh"

namespace brigade::cuda {
namespace {

// The largest of a row's values across the 4 lanes that hold it.
__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(kFullMask, v, 1));
  return fmaxf(v, __shfl_xor_sync(kFullMask, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(kFullMask, v, 1);
  return v + __shfl_xor_sync(kFullMask, v, 2);
}

// Without dropout at head dim 64, asking for 4 blocks per SM caps the kernel at 128 registers for a
// 40-byte spill, and it runs 7% faster than with 231 registers and 2 blocks (1.25 against 1.34 ms for
// GPT-2's 12 layers on an H200); with dropout the Philox draw would spill 104 bytes.
template <class T, int D, bool Dropout>
__global__ void __launch_bounds__(kMmaThreads, D == 64 && !Dropout ? 4 : 1)
    forward_kernel(HeadRows<T> y, float* lse, HeadRows<const T> q, HeadRows<const T> k, HeadRows<const T> v,
                   int blocks, AttentionGeometry g) {
  using L = TileLayout<D>;
  __shared__ __align__(128) unsigned char smem[2 * L::kBytes];  // the K tile (Q's first), the V tile
  const uint32_t k_tile = shared_address(smem), v_tile = k_tile + L::kBytes;

  const BlockOrder order = heavy_first(int(blockIdx.x), int(gridDim.x) / blocks, blocks, g.causal);
  const int bh = order.bh, i0 = order.block * kMmaRows;
  const int b = bh / g.heads, h = bh % g.heads;
  const int warp = int(threadIdx.x) / kWarp, lane = int(threadIdx.x) % kWarp;
  const int row0 = i0 + warp * 16;
  const int rows[2] = {row0 + lane / 4, row0 + lane / 4 + 8};  // the two query rows this lane holds

  load_tile<D>(k_tile, q, b, h, i0, g.tq);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  uint32_t qf[D / 16][4];
  load_a_fragments<D>(qf, k_tile, warp * 16);
  __syncthreads();  // every warp holds its Q: K's buffer is free

  const int end = g.key_end(min(g.tq, i0 + kMmaRows));
  // Every tile's K and V are one cp.async group each, committed in the order K0 V0 K1 V1 ...; a group
  // is committed even when empty (past the last tile), so "all but the newest group" is always the
  // one needed next.
  if (end > 0) {
    load_tile<D>(k_tile, k, b, h, 0, g.tk);
    cp_async_commit();
    load_tile<D>(v_tile, v, b, h, 0, g.tk);
    cp_async_commit();
  }

  float o[D / 8][4] = {};
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0, 0};
  const float scale = float(g.scale) * kLog2e;  // scores in base 2
  for (int j0 = 0; j0 < end; j0 += kMmaRows) {
    const bool more = j0 + kMmaRows < end;
    cp_async_wait<1>();  // this thread's copies of K_j have landed (V_j's may not) ...
    __syncthreads();     // ... and everyone's

    float s[kMmaRows / 8][4] = {};
    multiply_by_rows<T, D>(s, qf, k_tile);
    __syncthreads();  // every warp has read K_j: fetch K_{j+1} while the softmax and P V run
    if (more) load_tile<D>(k_tile, k, b, h, j0 + kMmaRows, g.tk);
    cp_async_commit();

    // Scale and mask. Keys past the end were loaded as zeros and are masked like future keys; a tile
    // wholly below the diagonal and inside Tk (most of them) skips the test altogether.
    const bool whole = !(g.causal && j0 + kMmaRows - 1 > g.past + row0) && j0 + kMmaRows <= g.tk;
#pragma unroll
    for (int n = 0; n < kMmaRows / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[n][e] *= scale;
    if (!whole) {
#pragma unroll
      for (int n = 0; n < kMmaRows / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (!g.visible(rows[e / 2], j0 + n * 8 + 2 * (lane % 4) + (e & 1))) s[n][e] = -INFINITY;
    }
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < kMmaRows / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) tile_max[e / 2] = fmaxf(tile_max[e / 2], s[n][e]);
    float rescale[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      // Every row sees key 0, which is in the first tile, so the max is finite from then on (rows
      // past Tq included: they see keys like the last row, and are never written).
      const float m = fmaxf(row_max[half], quad_max(tile_max[half]));
      rescale[half] = fast_exp2(row_max[half] - m);  // 0 on the first tile (2^-inf)
      row_max[half] = m;
      row_sum[half] *= rescale[half];
    }
#pragma unroll
    for (int n = 0; n < kMmaRows / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float p = fast_exp2(s[n][e] - row_max[e / 2]);
        row_sum[e / 2] += p;
        if constexpr (Dropout) s[n][e] = p * g.keep<float>(bh, rows[e / 2], j0 + n * 8 + 2 * (lane % 4) + (e & 1));
        else s[n][e] = p;
      }
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[n][e] *= rescale[e / 2];

    cp_async_wait<1>();  // V_j has landed (K_{j+1} may not)
    __syncthreads();
    multiply_into<T, D, kMmaRows>(o, s, v_tile);
    __syncthreads();  // every warp has read V_j: fetch V_{j+1} while the next S is computed
    if (more) load_tile<D>(v_tile, v, b, h, j0 + kMmaRows, g.tk);
    cp_async_commit();
  }

  float inv[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const float l = quad_sum(row_sum[half]);
    inv[half] = 1.0f / l;
    // Back from base 2: lse = ln(sum exp(scale s)) = ln 2 (m + log2 l).
    if (lane % 4 == 0 && rows[half] < g.tq) lse[int64_t(bh) * g.tq + rows[half]] = (row_max[half] + log2f(l)) * kLn2;
  }
  store_rows<T, D>(y, b, h, row0, g.tq, o, inv);
}

}  // namespace

// 16-bit data, a head dim with an mma kernel, and every row a whole number of 16-byte chunks on a
// 16-byte boundary (what cp.async and the pair stores need).
bool attention_mma_supports(const std::vector<const Tensor*>& operands) {
  const Tensor& first = *operands.front();
  if (!is_half(first.dtype()) || (first.size(3) != 64 && first.size(3) != 128)) return false;
  for (const Tensor* t : operands) {
    if (!is_aligned(t->raw_data(), 16) || t->stride(3) != 1) return false;
    for (int dim = 0; dim < 3; ++dim)
      if (t->stride(dim) % 8 != 0) return false;
  }
  return true;
}

namespace {

template <class T, int D>
void launch_forward(const Tensor& y, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                    const AttentionGeometry& g, int64_t blocks, int64_t grid) {
  auto kernel = g.dropout == 0 ? forward_kernel<T, D, false> : forward_kernel<T, D, true>;
  kernel<<<unsigned(grid), kMmaThreads, 0, stream_for(q)>>>(head_rows<T>(y), static_cast<float*>(lse.raw_data()),
                                                           head_rows<const T>(q), head_rows<const T>(k),
                                                           head_rows<const T>(v), int(blocks), g);
  BRIGADE_CUDA_CHECK_LAUNCH();
}

}  // namespace

void attention_forward_mma(const Tensor& y, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                           const AttentionGeometry& g) {
  const int64_t blocks = ceil_div(g.tq, kMmaRows), grid = q.size(0) * q.size(1) * blocks;
  BRIGADE_CHECK(grid <= int64_t(INT32_MAX), "attention_forward: too many heads x query blocks for one launch");
  const bool bf = q.dtype() == DType::bf16, wide = q.size(3) == 128;
  if (bf && wide) launch_forward<bf16, 128>(y, lse, q, k, v, g, blocks, grid);
  else if (bf) launch_forward<bf16, 64>(y, lse, q, k, v, g, blocks, grid);
  else if (wide) launch_forward<f16, 128>(y, lse, q, k, v, g, blocks, grid);
  else launch_forward<f16, 64>(y, lse, q, k, v, g, blocks, grid);
}

}  // namespace brigade::cuda
