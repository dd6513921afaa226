// Fused attention on CUDA cores, for every case the tensor-core kernels do not take: any head dim up
// to 256, f32, f64, bf16 and f16 (computing in f32, or f64 for f64).
//
// Each block of 128 threads owns kFixed = 8 rows (queries in forward and in backward's grad_q pass,
// keys in backward's grad_k/grad_v pass) and streams the other side through shared memory a tile of
// up to 32 rows at a time. Per tile, three phases separated by barriers:
//   1. scores: each thread takes (fixed row, tile row) pairs and computes their dot products over the
//      head dim from shared memory;
//   2. (forward only) the warp owning a fixed row finds the tile's maximum and turns scores into
//      weights — the online softmax's rescale step;
//   3. each warp folds the tile into its two fixed rows' accumulators, lane l owning the columns
//      l, l + 32, ... of the head dim, summing the tile rows in order.
// No shuffles and no atomics: every sum has one owner and a fixed order, so results are the same on
// every run. Rows are padded by one 32-bit word so that the threads of phase 1, which read different
// rows at the same column, do not all hit one bank. The tile height follows from the shared-memory
// budget: 32 rows for the common head dims, down to a few for f64 at 256 (slow, but correct).
#include <cmath>

#include "kernels/cuda/attention.cuh"

namespace brigade::cuda {
namespace {

constexpr int kThreads128 = 128;  // 4 warps
constexpr int kFixed = 8;         // fixed rows per block, 2 per warp
constexpr int kFixedPerWarp = kFixed / (kThreads128 / kWarp);
constexpr int kMaxTile = 32;
constexpr int kMaxPerLane = 256 / kWarp;   // head-dim columns per lane at the largest head dim
constexpr int kRowBytes = 38 * 1024;       // fixed rows and tiles; with the score arrays under 48 KiB

template <class T>
constexpr int row_pad() {
  return sizeof(T) >= 4 ? 1 : 2;  // one 32-bit word
}

// How many tile rows fit beside `fixed_copies` x kFixed fixed rows, two tile operands each.
template <class T>
int tile_rows(int d, int fixed_copies) {
  const int ld = d + row_pad<T>();
  const int free_elements = kRowBytes / int(sizeof(T)) - fixed_copies * kFixed * ld;
  return std::min(kMaxTile, free_elements / (2 * ld));
}

// Copies rows [r0, r0 + count) of one head into shared memory (ld elements apart); rows at or past
// `limit` become zeros, so every later read is of initialised memory.
template <class T>
__device__ __forceinline__ void stage_rows(T* dst, int ld, const HeadRows<const T>& src, int b, int h, int r0,
                                           int count, int limit, int d) {
  for (int e = int(threadIdx.x); e < count * d; e += int(blockDim.x)) {
    const int r = e / d, c = e % d;
    dst[r * ld + c] = r0 + r < limit ? src.row(b, h, r0 + r)[c] : T();
  }
}

template <class T>
__device__ __forceinline__ compute_t<T> dot(const T* a, const T* b, int d) {
  compute_t<T> sum = 0;
  for (int e = 0; e < d; ++e) sum += to_compute(a[e]) * to_compute(b[e]);
  return sum;
}

// ---- forward ----

template <class T>
__global__ void __launch_bounds__(kThreads128)
    forward_kernel(HeadRows<T> y, compute_t<T>* lse, HeadRows<const T> q, HeadRows<const T> k,
                   HeadRows<const T> v, int d, int tile, int blocks, AttentionGeometry g) {
  using C = compute_t<T>;
  __shared__ __align__(16) unsigned char rows_smem[kRowBytes];
  __shared__ C score[kFixed][kMaxTile];   // scale q.k, -inf where masked
  __shared__ C weight[kFixed][kMaxTile];  // exp(score - running max): what the normaliser sums
  __shared__ C kept[kFixed][kMaxTile];    // weight times dropout's Z: what multiplies v
  const int ld = d + row_pad<T>();
  T* qs = reinterpret_cast<T*>(rows_smem);
  T* ks = qs + kFixed * ld;
  T* vs = ks + tile * ld;

  const int bh = int(blockIdx.x) / blocks, i0 = int(blockIdx.x) % blocks * kFixed;
  const int b = bh / g.heads, h = bh % g.heads;
  const int warp = int(threadIdx.x) / kWarp, lane = int(threadIdx.x) % kWarp;
  stage_rows(qs, ld, q, b, h, i0, kFixed, g.tq, d);

  C acc[kFixedPerWarp][kMaxPerLane] = {};
  C row_max[kFixedPerWarp], row_sum[kFixedPerWarp];
  for (int rr = 0; rr < kFixedPerWarp; ++rr) row_max[rr] = -C(INFINITY), row_sum[rr] = 0;
  const C scale = C(g.scale);
  const int end = g.key_end(min(g.tq, i0 + kFixed));
  for (int j0 = 0; j0 < end; j0 += tile) {
    const int cols = min(tile, end - j0);
    __syncthreads();  // the previous tile has been read by everyone
    stage_rows(ks, ld, k, b, h, j0, cols, g.tk, d);
    stage_rows(vs, ld, v, b, h, j0, cols, g.tk, d);
    __syncthreads();
    for (int pair = int(threadIdx.x); pair < kFixed * cols; pair += kThreads128) {
      const int r = pair / cols, c = pair % cols, i = i0 + r, j = j0 + c;
      score[r][c] = i < g.tq && g.visible(i, j) ? dot(qs + r * ld, ks + c * ld, d) * scale : -C(INFINITY);
    }
    __syncthreads();
    C rescale[kFixedPerWarp];
    for (int rr = 0; rr < kFixedPerWarp; ++rr) {
      const int r = warp * kFixedPerWarp + rr;
      C m = row_max[rr];
      for (int c = 0; c < cols; ++c) m = max(m, score[r][c]);
      // A row past the last query sees nothing: it stays at -inf with weights 0 (and is never written).
      rescale[rr] = m == -C(INFINITY) ? C(1) : dev_exp(row_max[rr] - m);
      if (lane < cols) {
        const C e = m == -C(INFINITY) ? C(0) : dev_exp(score[r][lane] - m);
        weight[r][lane] = e;
        kept[r][lane] = e * g.keep<C>(bh, i0 + r, j0 + lane);
      }
      row_max[rr] = m;
    }
    __syncthreads();
    for (int rr = 0; rr < kFixedPerWarp; ++rr) {
      const int r = warp * kFixedPerWarp + rr;
      C sum = 0;
      for (int c = 0; c < cols; ++c) sum += weight[r][c];
      row_sum[rr] = row_sum[rr] * rescale[rr] + sum;
      for (int e = 0; e < kMaxPerLane; ++e) {
        const int col = lane + e * kWarp;
        if (col >= d) break;
        C a = acc[rr][e] * rescale[rr];
        for (int c = 0; c < cols; ++c) a += kept[r][c] * to_compute(vs[c * ld + col]);
        acc[rr][e] = a;
      }
    }
  }
  for (int rr = 0; rr < kFixedPerWarp; ++rr) {
    const int i = i0 + warp * kFixedPerWarp + rr;
    if (i >= g.tq) continue;
    const C inv = C(1) / row_sum[rr];
    T* out = y.row(b, h, i);
    for (int e = 0; e < kMaxPerLane; ++e) {
      const int col = lane + e * kWarp;
      if (col < d) out[col] = from_compute<T>(acc[rr][e] * inv);
    }
    if (lane == 0) lse[int64_t(bh) * g.tq + i] = row_max[rr] + dev_log(row_sum[rr]);
  }
}

// ---- backward: grad_k and grad_v, one block per 8 keys, streaming the queries that see them ----

template <class T>
__global__ void __launch_bounds__(kThreads128)
    backward_kv_kernel(HeadRows<T> grad_k, HeadRows<T> grad_v, HeadRows<const T> grad_y, HeadRows<const T> q,
                       HeadRows<const T> k, HeadRows<const T> v, const compute_t<T>* lse, const compute_t<T>* di,
                       int d, int tile, int blocks, AttentionGeometry g) {
  using C = compute_t<T>;
  __shared__ __align__(16) unsigned char rows_smem[kRowBytes];
  __shared__ C kept_weight[kFixed][kMaxTile];  // P o Z
  __shared__ C score_grad[kFixed][kMaxTile];   // scale dS
  __shared__ C tile_lse[kMaxTile], tile_di[kMaxTile];
  const int ld = d + row_pad<T>();
  T* ks = reinterpret_cast<T*>(rows_smem);
  T* vs = ks + kFixed * ld;
  T* qs = vs + kFixed * ld;
  T* gys = qs + tile * ld;

  const int bh = int(blockIdx.x) / blocks, j0 = int(blockIdx.x) % blocks * kFixed;
  const int b = bh / g.heads, h = bh % g.heads;
  const int warp = int(threadIdx.x) / kWarp, lane = int(threadIdx.x) % kWarp;
  stage_rows(ks, ld, k, b, h, j0, kFixed, g.tk, d);
  stage_rows(vs, ld, v, b, h, j0, kFixed, g.tk, d);

  C dk[kFixedPerWarp][kMaxPerLane] = {}, dv[kFixedPerWarp][kMaxPerLane] = {};
  const C scale = C(g.scale);
  const int64_t stats = int64_t(bh) * g.tq;
  for (int i0 = g.first_query(j0); i0 < g.tq; i0 += tile) {
    const int rows = min(tile, g.tq - i0);
    __syncthreads();
    stage_rows(qs, ld, q, b, h, i0, rows, g.tq, d);
    stage_rows(gys, ld, grad_y, b, h, i0, rows, g.tq, d);
    if (int(threadIdx.x) < rows) {
      tile_lse[threadIdx.x] = lse[stats + i0 + threadIdx.x];
      tile_di[threadIdx.x] = di[stats + i0 + threadIdx.x];
    }
    __syncthreads();
    for (int pair = int(threadIdx.x); pair < kFixed * rows; pair += kThreads128) {
      const int r = pair / rows, c = pair % rows, j = j0 + r, i = i0 + c;
      C pz = 0, ds = 0;
      if (g.visible(i, j)) {
        const C p = dev_exp(dot(qs + c * ld, ks + r * ld, d) * scale - tile_lse[c]);
        const C z = g.keep<C>(bh, i, j);
        pz = p * z;
        ds = scale * p * (z * dot(gys + c * ld, vs + r * ld, d) - tile_di[c]);
      }
      kept_weight[r][c] = pz;
      score_grad[r][c] = ds;
    }
    __syncthreads();
    for (int rr = 0; rr < kFixedPerWarp; ++rr) {
      const int r = warp * kFixedPerWarp + rr;
      for (int e = 0; e < kMaxPerLane; ++e) {
        const int col = lane + e * kWarp;
        if (col >= d) break;
        C a = dv[rr][e], s = dk[rr][e];
        for (int c = 0; c < rows; ++c) {
          a += kept_weight[r][c] * to_compute(gys[c * ld + col]);
          s += score_grad[r][c] * to_compute(qs[c * ld + col]);
        }
        dv[rr][e] = a, dk[rr][e] = s;
      }
    }
  }
  for (int rr = 0; rr < kFixedPerWarp; ++rr) {
    const int j = j0 + warp * kFixedPerWarp + rr;
    if (j >= g.tk) continue;
    T* gk = grad_k.row(b, h, j);
    T* gv = grad_v.row(b, h, j);
    for (int e = 0; e < kMaxPerLane; ++e) {
      const int col = lane + e * kWarp;
      if (col >= d) break;
      gk[col] = from_compute<T>(dk[rr][e]);
      gv[col] = from_compute<T>(dv[rr][e]);
    }
  }
}

// ---- backward: grad_q, one block per 8 queries, streaming the keys they see ----

template <class T>
__global__ void __launch_bounds__(kThreads128)
    backward_q_kernel(HeadRows<T> grad_q, HeadRows<const T> grad_y, HeadRows<const T> q, HeadRows<const T> k,
                      HeadRows<const T> v, const compute_t<T>* lse, const compute_t<T>* di, int d, int tile,
                      int blocks, AttentionGeometry g) {
  using C = compute_t<T>;
  __shared__ __align__(16) unsigned char rows_smem[kRowBytes];
  __shared__ C score_grad[kFixed][kMaxTile];  // scale dS
  const int ld = d + row_pad<T>();
  T* qs = reinterpret_cast<T*>(rows_smem);
  T* gys = qs + kFixed * ld;
  T* ks = gys + kFixed * ld;
  T* vs = ks + tile * ld;

  const int bh = int(blockIdx.x) / blocks, i0 = int(blockIdx.x) % blocks * kFixed;
  const int b = bh / g.heads, h = bh % g.heads;
  const int warp = int(threadIdx.x) / kWarp, lane = int(threadIdx.x) % kWarp;
  stage_rows(qs, ld, q, b, h, i0, kFixed, g.tq, d);
  stage_rows(gys, ld, grad_y, b, h, i0, kFixed, g.tq, d);

  C dq[kFixedPerWarp][kMaxPerLane] = {};
  const C scale = C(g.scale);
  const int64_t stats = int64_t(bh) * g.tq;
  const int end = g.key_end(min(g.tq, i0 + kFixed));
  for (int j0 = 0; j0 < end; j0 += tile) {
    const int cols = min(tile, end - j0);
    __syncthreads();
    stage_rows(ks, ld, k, b, h, j0, cols, g.tk, d);
    stage_rows(vs, ld, v, b, h, j0, cols, g.tk, d);
    __syncthreads();
    for (int pair = int(threadIdx.x); pair < kFixed * cols; pair += kThreads128) {
      const int r = pair / cols, c = pair % cols, i = i0 + r, j = j0 + c;
      C ds = 0;
      if (i < g.tq && g.visible(i, j)) {
        const C p = dev_exp(dot(qs + r * ld, ks + c * ld, d) * scale - lse[stats + i]);
        const C z = g.keep<C>(bh, i, j);
        ds = scale * p * (z * dot(gys + r * ld, vs + c * ld, d) - di[stats + i]);
      }
      score_grad[r][c] = ds;
    }
    __syncthreads();
    for (int rr = 0; rr < kFixedPerWarp; ++rr) {
      const int r = warp * kFixedPerWarp + rr;
      for (int e = 0; e < kMaxPerLane; ++e) {
        const int col = lane + e * kWarp;
        if (col >= d) break;
        C a = dq[rr][e];
        for (int c = 0; c < cols; ++c) a += score_grad[r][c] * to_compute(ks[c * ld + col]);
        dq[rr][e] = a;
      }
    }
  }
  for (int rr = 0; rr < kFixedPerWarp; ++rr) {
    const int i = i0 + warp * kFixedPerWarp + rr;
    if (i >= g.tq) continue;
    T* out = grad_q.row(b, h, i);
    for (int e = 0; e < kMaxPerLane; ++e) {
      const int col = lane + e * kWarp;
      if (col < d) out[col] = from_compute<T>(dq[rr][e]);
    }
  }
}

template <class T>
HeadRows<const T> in_rows(const Tensor& t) {
  return {static_cast<const T*>(t.raw_data()), t.stride(0), t.stride(1), t.stride(2)};
}

// One block per kFixed rows of each (batch, head); the grid is flat (x only) so that B H may exceed 65535.
unsigned grid_of(int64_t batch_heads, int64_t blocks, const char* op) {
  BRIGADE_CHECK(batch_heads * blocks <= int64_t(INT32_MAX), op, ": ", batch_heads, " heads x ", blocks,
                " blocks is too large for one launch");
  return unsigned(batch_heads * blocks);
}

}  // namespace

void attention_forward_generic(const Tensor& y, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                               const AttentionGeometry& g) {
  const int d = int(q.size(3));
  const int64_t blocks = ceil_div(g.tq, kFixed);
  visit_floating(q.dtype(), "attention_forward", [&](auto tag) {
    using T = decltype(tag);
    forward_kernel<T><<<grid_of(q.size(0) * q.size(1), blocks, "attention_forward"), kThreads128, 0, stream_for(q)>>>(
        head_rows<T>(y), static_cast<compute_t<T>*>(lse.raw_data()), in_rows<T>(q), in_rows<T>(k), in_rows<T>(v), d,
        tile_rows<T>(d, 1), int(blocks), g);
    BRIGADE_CUDA_CHECK_LAUNCH();
  });
}

void attention_backward_generic(const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v,
                                const Tensor& grad_y, const Tensor& q, const Tensor& k, const Tensor& v,
                                const Tensor& lse, const Tensor& di, const AttentionGeometry& g) {
  const int d = int(q.size(3));
  const int64_t bh = q.size(0) * q.size(1);
  const int64_t key_blocks = ceil_div(g.tk, kFixed), query_blocks = ceil_div(g.tq, kFixed);
  visit_floating(q.dtype(), "attention_backward", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const C* lse_data = static_cast<const C*>(lse.raw_data());
    const C* di_data = static_cast<const C*>(di.raw_data());
    backward_kv_kernel<T><<<grid_of(bh, key_blocks, "attention_backward"), kThreads128, 0, stream_for(q)>>>(
        head_rows<T>(grad_k), head_rows<T>(grad_v), in_rows<T>(grad_y), in_rows<T>(q), in_rows<T>(k), in_rows<T>(v),
        lse_data, di_data, d, tile_rows<T>(d, 2), int(key_blocks), g);
    BRIGADE_CUDA_CHECK_LAUNCH();
    backward_q_kernel<T><<<grid_of(bh, query_blocks, "attention_backward"), kThreads128, 0, stream_for(q)>>>(
        head_rows<T>(grad_q), in_rows<T>(grad_y), in_rows<T>(q), in_rows<T>(k), in_rows<T>(v), lse_data, di_data, d,
        tile_rows<T>(d, 2), int(query_blocks), g);
    BRIGADE_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace brigade::cuda
