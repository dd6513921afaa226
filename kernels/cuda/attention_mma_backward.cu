// Fused attention backward on tensor cores (bf16, f16; head dim 64 or 128). Deterministic without
// atomics: two kernels, each output row owned by one warp that sums in a fixed order.
//
//   grad_k, grad_v: a block per (batch, head, 64 keys); each warp holds its 16 keys' k as mma A
//     fragments in registers (v stays in shared memory, read a k-step at a time: registers are what
//     this kernel runs short of) and walks the query tiles that see them (from the first query
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

// The streamed tiles are narrower than 64 rows: with k, grad_k and grad_v (or q, dO and grad_q) per
// lane, 64-wide score tiles would need more registers than a thread has. nvcc -Xptxas -v (sm_90):
// 32-row tiles spill ~180 bytes per thread at head dim 128 with v in registers too, 80 without; 16-row
// query tiles at head dim 128 leave the grad_k / grad_v kernel without spills.
template <int D>
constexpr int kQueryTile = D > 64 ? 16 : 32;
constexpr int kKeyTile = 32;

template <class T, int D>
__global__ void __launch_bounds__(kMmaThreads)
    backward_kv_kernel(HeadRows<T> grad_k, HeadRows<T> grad_v, HeadRows<const T> grad_y, HeadRows<const T> q,
                       HeadRows<const T> k, HeadRows<const T> v, const float* lse, const float* di, int blocks,
                       AttentionGeometry g) {
  using L = TileLayout<D>;
  // K's tile, then each query tile: Q in rows [0, kTile), dO in rows 32..; and V's tile, kept.
  __shared__ __align__(128) unsigned char smem[2 * L::kBytes];
  constexpr int kTile = kQueryTile<D>;
  __shared__ float tile_lse[kTile], tile_di[kTile];
  const uint32_t q_tile = shared_address(smem), dy_tile = q_tile + L::kBytes / 2, v_tile = q_tile + L::kBytes;

  const int bh = int(blockIdx.x) / blocks, j0 = int(blockIdx.x) % blocks * kMmaRows;
  const int b = bh / g.heads, h = bh % g.heads;
  const int warp = int(threadIdx.x) / kWarp, lane = int(threadIdx.x) % kWarp;
  const int key0 = j0 + warp * 16;
  const int keys[2] = {key0 + lane / 4, key0 + lane / 4 + 8};  // the two key rows this lane holds

  load_tile<D>(q_tile, k, b, h, j0, g.tk);
  load_tile<D>(v_tile, v, b, h, j0, g.tk);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  uint32_t kf[D / 16][4];
  load_a_fragments<D>(kf, q_tile, warp * 16);

  float dk[D / 8][4] = {}, dv[D / 8][4] = {};
  const float scale = float(g.scale);
  const int64_t stats = int64_t(bh) * g.tq;
  for (int i0 = g.first_query(j0); i0 < g.tq; i0 += kTile) {
    __syncthreads();  // everyone is done with the previous tiles (or with K's)
    load_tile<D, kTile>(q_tile, q, b, h, i0, g.tq);
    load_tile<D, kTile>(dy_tile, grad_y, b, h, i0, g.tq);
    cp_async_commit();
    if (int(threadIdx.x) < kTile) {
      const int i = i0 + int(threadIdx.x);
      tile_lse[threadIdx.x] = i < g.tq ? lse[stats + i] : 0.0f;
      tile_di[threadIdx.x] = i < g.tq ? di[stats + i] : 0.0f;
    }
    cp_async_wait<0>();
    __syncthreads();

    float s[kTile / 8][4] = {}, dp[kTile / 8][4] = {};
    multiply_by_rows<T, D>(s, kf, q_tile);                    // Sᵀ: keys x queries
    multiply_by_rows<T, D>(dp, v_tile, warp * 16, dy_tile);  // dPᵀ = V dOᵀ
#pragma unroll
    for (int n = 0; n < kTile / 8; ++n)
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
    multiply_into<T, D, kTile>(dv, s, dy_tile);  // (Pᵀ o Zᵀ) dO
    multiply_into<T, D, kTile>(dk, dp, q_tile);  // dSᵀ Q
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
  for (int j0 = 0; j0 < end; j0 += kKeyTile) {
    __syncthreads();
    load_tile<D, kKeyTile>(first, k, b, h, j0, g.tk);
    load_tile<D, kKeyTile>(second, v, b, h, j0, g.tk);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();

    float s[kKeyTile / 8][4] = {}, dp[kKeyTile / 8][4] = {};
    multiply_by_rows<T, D>(s, qf, first);    // S = Q Kᵀ
    multiply_by_rows<T, D>(dp, gf, second);  // dP = dO Vᵀ
#pragma unroll
    for (int n = 0; n < kKeyTile / 8; ++n)
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
    multiply_into<T, D, kKeyTile>(dq, s, first);  // dS K
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
