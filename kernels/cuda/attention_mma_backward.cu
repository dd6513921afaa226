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
//
// As in the forward (attention_mma_forward.cu): base-2 exponentials (lse read once and turned into
// base 2), no Philox code without dropout, the heaviest blocks launched first. The streamed tiles
// are double-buffered: two stages in shared memory, the next tile's copy issued before this one's
// products start, so the copy runs under them; the next tile's lse and D are read into registers
// at the same time and stored for it once this tile is done.
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

// Without dropout at head dim 64, 3 blocks per SM: 168 registers and a 60-byte spill. Measured on an
// H200 (GPT-2's 12 layers, one ncu sample each) it is a wash against 219 registers and 2 blocks (2.21
// against 2.15 ms); this is the variant the GPU tests ran. With dropout it would spill 276 bytes.
template <class T, int D, bool Dropout>
__global__ void __launch_bounds__(kMmaThreads, D == 64 && !Dropout ? 3 : 1)
    backward_kv_kernel(HeadRows<T> grad_k, HeadRows<T> grad_v, HeadRows<const T> grad_y, HeadRows<const T> q,
                       HeadRows<const T> k, HeadRows<const T> v, const float* lse, const float* di, int blocks,
                       AttentionGeometry g) {
  using L = TileLayout<D>;
  constexpr int kTile = kQueryTile<D>;
  constexpr int kStage = 2 * kTile * D * 2;  // one query tile's q and dO
  static_assert(2 * kStage >= L::kBytes, "K's tile passes through the two stages");
  // Two stages (a query tile computed on, the next one landing), then V's tile, kept. K's tile is
  // loaded into the stages' space first, and read into registers before the stream starts.
  __shared__ __align__(128) unsigned char smem[2 * kStage + L::kBytes];
  __shared__ float tile_lse[2][kTile], tile_di[2][kTile];  // per stage; lse in base 2
  const uint32_t stages = shared_address(smem), v_tile = stages + 2 * kStage;

  const BlockOrder order = heavy_first(int(blockIdx.x), int(gridDim.x) / blocks, blocks, false);
  const int bh = order.bh, j0 = order.block * kMmaRows;
  const int b = bh / g.heads, h = bh % g.heads;
  const int warp = int(threadIdx.x) / kWarp, lane = int(threadIdx.x) % kWarp;
  const int key0 = j0 + warp * 16;
  const int keys[2] = {key0 + lane / 4, key0 + lane / 4 + 8};  // the two key rows this lane holds

  load_tile<D>(stages, k, b, h, j0, g.tk);
  load_tile<D>(v_tile, v, b, h, j0, g.tk);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  uint32_t kf[D / 16][4];
  load_a_fragments<D>(kf, stages, warp * 16);
  __syncthreads();  // every warp holds its K: the stages are free

  const int64_t stats = int64_t(bh) * g.tq;
  // Thread t < kTile carries query i0 + t's lse (base 2) and D from the global read to the stage.
  float next_lse = 0, next_di = 0;
  auto fetch = [&](int i0, int stage) {
    const uint32_t q_tile = stages + uint32_t(stage * kStage);
    load_tile<D, kTile>(q_tile, q, b, h, i0, g.tq);
    load_tile<D, kTile>(q_tile + kStage / 2, grad_y, b, h, i0, g.tq);
    const int i = i0 + int(threadIdx.x);
    if (int(threadIdx.x) < kTile && i < g.tq) next_lse = lse[stats + i], next_di = di[stats + i];
    else next_lse = next_di = 0;
  };
  auto store_stats = [&](int stage) {
    if (int(threadIdx.x) < kTile) tile_lse[stage][threadIdx.x] = next_lse * kLog2e, tile_di[stage][threadIdx.x] = next_di;
  };

  // One cp.async group per query tile, committed even when empty (past the last tile), so that
  // "all but the newest group" is always the tile about to be used.
  const int first = g.first_query(j0);
  if (first < g.tq) fetch(first, 0), store_stats(0);
  cp_async_commit();

  float dk[D / 8][4] = {}, dv[D / 8][4] = {};
  const float scale = float(g.scale), scale2 = scale * kLog2e;
  int stage = 0;
  for (int i0 = first; i0 < g.tq; i0 += kTile, stage ^= 1) {
    const bool more = i0 + kTile < g.tq;
    if (more) fetch(i0 + kTile, stage ^ 1);  // the other stage was freed by the last iteration's barrier
    cp_async_commit();
    cp_async_wait<1>();  // this tile has landed (the next may not)
    __syncthreads();

    const uint32_t q_tile = stages + uint32_t(stage * kStage), dy_tile = q_tile + kStage / 2;
    float s[kTile / 8][4] = {}, dp[kTile / 8][4] = {};
    multiply_by_rows<T, D>(s, kf, q_tile);                    // Sᵀ: keys x queries
    multiply_by_rows<T, D>(dp, v_tile, warp * 16, dy_tile);  // dPᵀ = V dOᵀ
    // P and dS (without the scale, applied once to grad_k at the end). A tile whose every query sees
    // every key of this warp (most of them) skips the mask test.
    const bool whole = i0 + kTile <= g.tq && key0 + 16 <= g.tk && (!g.causal || key0 + 15 <= g.past + i0);
#pragma unroll
    for (int n = 0; n < kTile / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int c = n * 8 + 2 * (lane % 4) + (e & 1);
        const float p = fast_exp2(s[n][e] * scale2 - tile_lse[stage][c]);
        if constexpr (Dropout) {
          const float z = g.keep<float>(bh, i0 + c, keys[e / 2]);
          s[n][e] = p * z;
          dp[n][e] = p * (z * dp[n][e] - tile_di[stage][c]);
        } else {
          s[n][e] = p;
          dp[n][e] = p * (dp[n][e] - tile_di[stage][c]);
        }
      }
    if (!whole) {
#pragma unroll
      for (int n = 0; n < kTile / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int i = i0 + n * 8 + 2 * (lane % 4) + (e & 1);
          if (i >= g.tq || !g.visible(i, keys[e / 2])) s[n][e] = dp[n][e] = 0;
        }
    }
    multiply_into<T, D, kTile>(dv, s, dy_tile);  // (Pᵀ o Zᵀ) dO
    multiply_into<T, D, kTile>(dk, dp, q_tile);  // dSᵀ Q
    if (more) store_stats(stage ^ 1);
    __syncthreads();  // every warp is done with this stage: the next iteration refills it
  }
  const float one[2] = {1.0f, 1.0f}, scaled[2] = {scale, scale};
  store_rows<T, D>(grad_k, b, h, key0, g.tk, dk, scaled);
  store_rows<T, D>(grad_v, b, h, key0, g.tk, dv, one);
}

template <class T, int D, bool Dropout>
__global__ void __launch_bounds__(kMmaThreads)
    backward_q_kernel(HeadRows<T> grad_q, HeadRows<const T> grad_y, HeadRows<const T> q, HeadRows<const T> k,
                      HeadRows<const T> v, const float* lse, const float* di, int blocks, AttentionGeometry g) {
  using L = TileLayout<D>;
  constexpr int kStage = 2 * kKeyTile * D * 2;  // one key tile's K and V
  static_assert(2 * kStage <= 2 * L::kBytes, "the two stages reuse Q's and dO's space");
  // Q's tile and dO's first; once every warp holds them as fragments, two stages of K and V tiles.
  __shared__ __align__(128) unsigned char smem[2 * L::kBytes];
  const uint32_t first = shared_address(smem), second = first + L::kBytes;

  const BlockOrder order = heavy_first(int(blockIdx.x), int(gridDim.x) / blocks, blocks, g.causal);
  const int bh = order.bh, i0 = order.block * kMmaRows;
  const int b = bh / g.heads, h = bh % g.heads;
  const int warp = int(threadIdx.x) / kWarp, lane = int(threadIdx.x) % kWarp;
  const int row0 = i0 + warp * 16;
  const int rows[2] = {row0 + lane / 4, row0 + lane / 4 + 8};
  const int64_t stats = int64_t(bh) * g.tq;
  float row_lse[2], row_di[2];  // lse in base 2
  for (int half = 0; half < 2; ++half) {
    row_lse[half] = rows[half] < g.tq ? lse[stats + rows[half]] * kLog2e : 0.0f;
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
  __syncthreads();  // every warp holds its Q and dO: the space is free for the stages

  auto fetch = [&](int j0, int stage) {
    const uint32_t k_tile = first + uint32_t(stage * kStage);
    load_tile<D, kKeyTile>(k_tile, k, b, h, j0, g.tk);
    load_tile<D, kKeyTile>(k_tile + kStage / 2, v, b, h, j0, g.tk);
  };
  // One cp.async group per key tile, committed even when empty (see the grad_k / grad_v kernel).
  const int end = g.key_end(min(g.tq, i0 + kMmaRows));
  if (end > 0) fetch(0, 0);
  cp_async_commit();

  float dq[D / 8][4] = {};
  const float scale = float(g.scale), scale2 = scale * kLog2e;
  int stage = 0;
  for (int j0 = 0; j0 < end; j0 += kKeyTile, stage ^= 1) {
    const bool more = j0 + kKeyTile < end;
    if (more) fetch(j0 + kKeyTile, stage ^ 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();

    const uint32_t k_tile = first + uint32_t(stage * kStage), v_tile = k_tile + kStage / 2;
    float s[kKeyTile / 8][4] = {}, dp[kKeyTile / 8][4] = {};
    multiply_by_rows<T, D>(s, qf, k_tile);   // S = Q Kᵀ
    multiply_by_rows<T, D>(dp, gf, v_tile);  // dP = dO Vᵀ
    // dS without the scale (applied once to grad_q at the end); the mask test only where needed.
    const bool whole = row0 + 16 <= g.tq && j0 + kKeyTile <= g.tk && (!g.causal || j0 + kKeyTile - 1 <= g.past + row0);
#pragma unroll
    for (int n = 0; n < kKeyTile / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float p = fast_exp2(s[n][e] * scale2 - row_lse[e / 2]);
        if constexpr (Dropout) {
          const int j = j0 + n * 8 + 2 * (lane % 4) + (e & 1);
          s[n][e] = p * (g.keep<float>(bh, rows[e / 2], j) * dp[n][e] - row_di[e / 2]);
        } else {
          s[n][e] = p * (dp[n][e] - row_di[e / 2]);
        }
      }
    if (!whole) {
#pragma unroll
      for (int n = 0; n < kKeyTile / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int i = rows[e / 2], j = j0 + n * 8 + 2 * (lane % 4) + (e & 1);
          if (i >= g.tq || !g.visible(i, j)) s[n][e] = 0;
        }
    }
    multiply_into<T, D, kKeyTile>(dq, s, k_tile);  // dS K
    __syncthreads();  // every warp is done with this stage: the next iteration refills it
  }
  const float scaled[2] = {scale, scale};
  store_rows<T, D>(grad_q, b, h, row0, g.tq, dq, scaled);
}

template <class T, int D>
void launch_backward(const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v, const Tensor& grad_y,
                     const Tensor& q, const Tensor& k, const Tensor& v, const float* lse, const float* di,
                     const AttentionGeometry& g) {
  const int64_t bh = q.size(0) * q.size(1);
  const int64_t key_blocks = ceil_div(g.tk, kMmaRows), query_blocks = ceil_div(g.tq, kMmaRows);
  BRIGADE_CHECK(bh * std::max(key_blocks, query_blocks) <= int64_t(INT32_MAX),
                "attention_backward: too many heads x blocks for one launch");
  const bool dropout = g.dropout != 0;
  auto kv_kernel = dropout ? backward_kv_kernel<T, D, true> : backward_kv_kernel<T, D, false>;
  auto q_kernel = dropout ? backward_q_kernel<T, D, true> : backward_q_kernel<T, D, false>;
  kv_kernel<<<unsigned(bh * key_blocks), kMmaThreads, 0, stream_for(q)>>>(
      head_rows<T>(grad_k), head_rows<T>(grad_v), head_rows<const T>(grad_y), head_rows<const T>(q),
      head_rows<const T>(k), head_rows<const T>(v), lse, di, int(key_blocks), g);
  BRIGADE_CUDA_CHECK_LAUNCH();
  q_kernel<<<unsigned(bh * query_blocks), kMmaThreads, 0, stream_for(q)>>>(
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
