// Fused attention backward on tensor cores (bf16, f16; head dim 64 or 128). Deterministic without
// atomics: two kernels, each output row owned by one warp that sums in a fixed order.
//
//   grad_k, grad_v: a block per (batch, head, 64 keys); each warp holds its 16 keys' k and v as
//     mma A fragments in registers and walks the query tiles that see them (from the first query
//     whose causal window reaches the block), recomputing per tile, transposed (keys x queries):
//       Sᵀ = K Qᵀ,  Pᵀ = exp(scale Sᵀ - lse),  dPᵀ = V dOᵀ,
//       grad_v += (Pᵀ o Zᵀ) dO,   grad_k += scale (Pᵀ o (Zᵀ o dPᵀ - D)) Q
//   grad_q: a block per (batch, head, 64 queries), q and dO as fragments, walking the key tiles:
//       S = Q Kᵀ, P = exp(scale S - lse), dP = dO Vᵀ,   grad_q += scale (P o (Z o dP - D)) K
// S and P are computed twice (once per kernel) instead of summing grad_q with atomics: the price of
// determinism is about one more Q Kᵀ and dO Vᵀ per tile. D = rowsum(dO o y) comes from attention.cu.
#include "kernels/cuda/attention_mma.cuh"

namespace brigade::cuda {
namespace {

// Query tiles of the grad_k / grad_v pass have 32 rows, not 64: with k, v, grad_k and grad_v all
// per lane, 64-wide Sᵀ and dPᵀ tiles would need more registers than a thread has at head dim 128.
constexpr int kQueryTile = 32;

template <class T, int D>
__global__ void __launch_bounds__(kMmaThreads)
    backward_kv_kernel(HeadRows<T> grad_k, HeadRows<T> grad_v, HeadRows<const T> grad_y, HeadRows<const T> q,
                       HeadRows<const T> k, HeadRows<const T> v, const float* lse, const float* di, int blocks,
                       AttentionGeometry g) {
  using L = TileLayout<D>;
  __shared__ __align__(128) unsigned char smem[2 * L::kBytes];  // K then Q tiles; V then dO tiles
  __shared__ float tile_lse[kQueryTile], tile_di[kQueryTile];
  const uint32_t first = shared_address(smem), second = first + L::kBytes;

  const int bh = int(blockIdx.x) / blocks, j0 = int(blockIdx.x) % blocks * kMmaRows;
  const int b = bh / g.heads, h = bh % g.heads;
  const int warp = int(threadIdx.x) / kWarp, lane = int(threadIdx.x) % kWarp;
  const int key0 = j0 + warp * 16;
  const int keys[2] = {key0 + lane / 4, key0 + lane / 4 + 8};  // the two key rows this lane holds

  load_tile<D>(first, k, b, h, j0, g.tk);
  load_tile<D>(second, v, b, h, j0, g.tk);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  uint32_t kf[D / 16][4], vf[D / 16][4];
  load_a_fragments<D>(kf, first, warp * 16);
  load_a_fragments<D>(vf, second, warp * 16);

  float dk[D / 8][4] = {}, dv[D / 8][4] = {};
  const float scale = float(g.scale);
  const int64_t stats = int64_t(bh) * g.tq;
  for (int i0 = g.first_query(j0); i0 < g.tq; i0 += kQueryTile) {
    __syncthreads();  // everyone is done with the previous tiles (or with K and V's)
    load_tile<D, kQueryTile>(first, q, b, h, i0, g.tq);  // the first 32 rows of the 64-row tiles
    load_tile<D, kQueryTile>(second, grad_y, b, h, i0, g.tq);
    cp_async_commit();
    if (int(threadIdx.x) < kQueryTile) {
      const int i = i0 + int(threadIdx.x);
      tile_lse[threadIdx.x] = i < g.tq ? lse[stats + i] : 0.0f;
      tile_di[threadIdx.x] = i < g.tq ? di[stats + i] : 0.0f;
    }
    cp_async_wait<0>();
    __syncthreads();

    float s[kQueryTile / 8][4] = {}, dp[kQueryTile / 8][4] = {};
    multiply_by_rows<T, D>(s, kf, first);    // Sᵀ: keys x queries
    multiply_by_rows<T, D>(dp, vf, second);  // dPᵀ
#pragma unroll
    for (int n = 0; n < kQueryTile / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int c = n * 8 + 2 * (lane % 4) + (e & 1), i = i0 + c, j = keys[e / 2];
        float pz = 0, ds = 0;
        if (i < g.tq && g.visible(i, j)) {
          const float p = dev_exp(s[n][e] * scale - tile_lse[c]);
          const float z = g.keep<float>(bh, i, j);
          pz = p * z;
          ds = scale * p * (z * dp[n][e] - tile_di[c]);
        }
        s[n][e] = pz;
        dp[n][e] = ds;
      }
    multiply_into<T, D, kQueryTile>(dv, s, second);  // (Pᵀ o Zᵀ) dO
    multiply_into<T, D, kQueryTile>(dk, dp, first);  // dSᵀ Q
  }
  const float one[2] = {1.0f, 1.0f};
  store_rows<T, D>(grad_k, b, h, key0, g.tk, dk, one);
  store_rows<T, D>(grad_v, b, h, key0, g.tk, dv, one);
}

template <class T, int D>
__global__ void __launch_bounds__(kMmaThreads)
    backward_q_kernel(HeadRows<T> grad_q, HeadRows<const T> grad_y, HeadRows<const T> q, HeadRows<const T> k,
                      HeadRows<const T> v, const float* lse, const float* di, int blocks, AttentionGeometry g) {
  using L = TileLayout<D>;
  __shared__ __align__(128) unsigned char smem[2 * L::kBytes];  // Q then K tiles; dO then V tiles
  const uint32_t first = shared_address(smem), second = first + L::kBytes;

  const int bh = int(blockIdx.x) / blocks, i0 = int(blockIdx.x) % blocks * kMmaRows;
  const int b = bh / g.heads, h = bh % g.heads;
  const int warp = int(threadIdx.x) / kWarp, lane = int(threadIdx.x) % kWarp;
  const int row0 = i0 + warp * 16;
  const int rows[2] = {row0 + lane / 4, row0 + lane / 4 + 8};
  const int64_t stats = int64_t(bh) * g.tq;
  float row_lse[2], row_di[2];
  for (int half = 0; half < 2; ++half) {
    row_lse[half] = rows[half] < g.tq ? lse[stats + rows[half]] : 0.0f;
    row_di[half] = rows[half] < g.tq ? di[stats + rows[half]] : 0.0f;
  }

  load_tile<D>(first, q, b, h, i0, g.tq);
  load_tile<D>(second, grad_y, b, h, i0, g.tq);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  uint32_t qf[D / 16][4], gf[D / 16][4];
  load_a_fragments<D>(qf, first, warp * 16);
  load_a_fragments<D>(gf, second, warp * 16);

  float dq[D / 8][4] = {};
  const float scale = float(g.scale);
  const int end = g.key_end(min(g.tq, i0 + kMmaRows));
  for (int j0 = 0; j0 < end; j0 += kMmaRows) {
    __syncthreads();
    load_tile<D>(first, k, b, h, j0, g.tk);
    load_tile<D>(second, v, b, h, j0, g.tk);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();

    float s[kMmaRows / 8][4] = {}, dp[kMmaRows / 8][4] = {};
    multiply_by_rows<T, D>(s, qf, first);    // S = Q Kᵀ
    multiply_by_rows<T, D>(dp, gf, second);  // dP = dO Vᵀ
#pragma unroll
    for (int n = 0; n < kMmaRows / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = rows[e / 2], j = j0 + n * 8 + 2 * (lane % 4) + (e & 1);
        float ds = 0;
        if (i < g.tq && g.visible(i, j)) {
          const float p = dev_exp(s[n][e] * scale - row_lse[e / 2]);
          ds = scale * p * (g.keep<float>(bh, i, j) * dp[n][e] - row_di[e / 2]);
        }
        s[n][e] = ds;
      }
    multiply_into<T, D, kMmaRows>(dq, s, first);  // dS K
  }
  const float one[2] = {1.0f, 1.0f};
  store_rows<T, D>(grad_q, b, h, row0, g.tq, dq, one);
}

template <class T, int D>
void launch_backward(const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v, const Tensor& grad_y,
                     const Tensor& q, const Tensor& k, const Tensor& v, const float* lse, const float* di,
                     const AttentionGeometry& g) {
  const int64_t bh = q.size(0) * q.size(1);
  const int64_t key_blocks = ceil_div(g.tk, kMmaRows), query_blocks = ceil_div(g.tq, kMmaRows);
  BRIGADE_CHECK(bh * std::max(key_blocks, query_blocks) <= int64_t(INT32_MAX),
                "attention_backward: too many heads x blocks for one launch");
  backward_kv_kernel<T, D><<<unsigned(bh * key_blocks), kMmaThreads, 0, stream_for(q)>>>(
      head_rows<T>(grad_k), head_rows<T>(grad_v), head_rows<const T>(grad_y), head_rows<const T>(q),
      head_rows<const T>(k), head_rows<const T>(v), lse, di, int(key_blocks), g);
  BRIGADE_CUDA_CHECK_LAUNCH();
  backward_q_kernel<T, D><<<unsigned(bh * query_blocks), kMmaThreads, 0, stream_for(q)>>>(
      head_rows<T>(grad_q), head_rows<const T>(grad_y), head_rows<const T>(q), head_rows<const T>(k),
      head_rows<const T>(v), lse, di, int(query_blocks), g);
  BRIGADE_CUDA_CHECK_LAUNCH();
}

}  // namespace

void attention_backward_mma(const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v, const Tensor& grad_y,
                            const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& lse, const Tensor& di,
                            const AttentionGeometry& g) {
  const float* l = static_cast<const float*>(lse.raw_data());
  const float* d = static_cast<const float*>(di.raw_data());
  const bool bf = q.dtype() == DType::bf16, wide = q.size(3) == 128;
  if (bf && wide) launch_backward<bf16, 128>(grad_q, grad_k, grad_v, grad_y, q, k, v, l, d, g);
  else if (bf) launch_backward<bf16, 64>(grad_q, grad_k, grad_v, grad_y, q, k, v, l, d, g);
  else if (wide) launch_backward<f16, 128>(grad_q, grad_k, grad_v, grad_y, q, k, v, l, d, g);
  else launch_backward<f16, 64>(grad_q, grad_k, grad_v, grad_y, q, k, v, l, d, g);
}

}  // namespace brigade::cuda
