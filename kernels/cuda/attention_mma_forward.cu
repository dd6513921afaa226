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
// K's copy is one cp.async group and V's another, so S is computed while V still lands.
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

template <class T, int D>
__global__ void __launch_bounds__(kMmaThreads)
    forward_kernel(HeadRows<T> y, float* lse, HeadRows<const T> q, HeadRows<const T> k, HeadRows<const T> v,
                   int blocks, AttentionGeometry g) {
  using L = TileLayout<D>;
  __shared__ __align__(128) unsigned char smem[2 * L::kBytes];  // the K tile (Q's first), the V tile
  const uint32_t k_tile = shared_address(smem), v_tile = k_tile + L::kBytes;

  const int bh = int(blockIdx.x) / blocks, i0 = int(blockIdx.x) % blocks * kMmaRows;
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

  float o[D / 8][4] = {};
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0, 0};
  const float scale = float(g.scale);
  const int end = g.key_end(min(g.tq, i0 + kMmaRows));
  for (int j0 = 0; j0 < end; j0 += kMmaRows) {
    __syncthreads();  // every warp is done with the previous tiles (and with Q's, the first time)
    load_tile<D>(k_tile, k, b, h, j0, g.tk);
    cp_async_commit();
    load_tile<D>(v_tile, v, b, h, j0, g.tk);
    cp_async_commit();
    cp_async_wait<1>();  // K has landed (this thread's copies) ...
    __syncthreads();     // ... and everyone's

    float s[kMmaRows / 8][4] = {};
    multiply_by_rows<T, D>(s, qf, k_tile);

    // Scale and mask. Keys past the end were loaded as zeros and are masked like future keys; a tile
    // wholly below the diagonal and inside Tk needs no test.
    const bool whole = !(g.causal && j0 + kMmaRows - 1 > g.past + row0) && j0 + kMmaRows <= g.tk;
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < kMmaRows / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int j = j0 + n * 8 + 2 * (lane % 4) + (e & 1);
        const bool seen = whole || g.visible(rows[e / 2], j);
        s[n][e] = seen ? s[n][e] * scale : -INFINITY;
        tile_max[e / 2] = fmaxf(tile_max[e / 2], s[n][e]);
      }
    float rescale[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      // Every row sees key 0, which is in the first tile, so the max is finite from then on (rows
      // past Tq included: they see keys like the last row, and are never written).
      const float m = fmaxf(row_max[half], quad_max(tile_max[half]));
      rescale[half] = dev_exp(row_max[half] - m);  // 0 on the first tile (exp(-inf))
      row_max[half] = m;
      row_sum[half] *= rescale[half];
    }
#pragma unroll
    for (int n = 0; n < kMmaRows / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float p = dev_exp(s[n][e] - row_max[e / 2]);
        row_sum[e / 2] += p;
        s[n][e] = g.dropout == 0 ? p : p * g.keep<float>(bh, rows[e / 2], j0 + n * 8 + 2 * (lane % 4) + (e & 1));
      }
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[n][e] *= rescale[e / 2];

    cp_async_wait<0>();  // V too
    __syncthreads();
    multiply_into<T, D, kMmaRows>(o, s, v_tile);
  }

  float inv[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const float l = quad_sum(row_sum[half]);
    inv[half] = 1.0f / l;
    if (lane % 4 == 0 && rows[half] < g.tq) lse[int64_t(bh) * g.tq + rows[half]] = row_max[half] + dev_log(l);
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
  forward_kernel<T, D><<<unsigned(grid), kMmaThreads, 0, stream_for(q)>>>(
      head_rows<T>(y), static_cast<float*>(lse.raw_data()), head_rows<const T>(q), head_rows<const T>(k),
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
