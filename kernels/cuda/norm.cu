// CUDA kernels: layer_norm and rms_norm over the last dim, forward and backward.
//
// Forward and input gradient work row by row: a warp per row (a block for rows longer than 1024),
// a few reductions over the row, then one write pass. The row is read several times; after the
// first read it comes from cache (L1: a warp's row of 1024 bf16 is 2 KB, eight warps 16 KB), so the
// kernels stay memory-bound on one read and one write.
//
// Why fast: every pass moves 16 bytes per load and store (row_vectors.cuh) when x, y, weight, bias
// and the residual share a phase — every row when d is a multiple of 8 (bf16) or 4 (f32), GPT-2's
// 768 and LLaMA's 4096 included; other rows take the scalar path, element by element. Expected on an
// H200: 80-90% of the copy bandwidth for the forward and input gradient at d = 768-4096 (unmeasured
// yet; `brigade bench kernels` has the rows). Limits: the forward's three reductions (mean, variance,
// none for the write) each cost a warp or block barrier, which at one short row per warp is latency
// the other warps must hide; re-reads that miss L1 (rows > 8K elements) go to L2.
//
// The parameter gradients sum over rows instead: grad_weight[j] = sum_r grad_y[r, j] * x_hat[r, j].
// Threads take columns (a warp reads 32 neighbouring columns of a row at once) and the rows are cut
// into chunks: stage one writes one partial sum per (chunk, column) to scratch memory, stage two adds
// each column's partials in chunk order. The chunking depends only on the shape, so the result has
// the same bits on every run — no atomics. Stage one reads grad_y and x as 16-byte vectors when d
// allows (each thread then owns 8 bf16 or 4 f32 neighbouring columns); stage two reads only the
// partials (chunks x d f32, a few MB), so the pair is bound by one read of grad_y and x.
//
// On the GPU (the contract both backends share: kernels/twins/norm.inc):
// Contiguous [rows, D] data in f32, f64, bf16 or f16 (16-bit data computes in f32); weight, bias and
// the gradients share x's dtype; mean and rstd [rows] are f32 (f64 for f64 data). Deterministic: the
// parameter gradients sum over rows in a fixed two-stage order, without atomics.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/row_vectors.cuh"

namespace brigade::cuda {
namespace {

constexpr int64_t kTargetParamBlocks = 1024;  // stage one's grid: enough blocks to fill the GPU
constexpr int64_t kMinRowsPerChunk = 64;      // ... each summing at least 8 rows per thread

template <class T>
const T* data_or_null(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.raw_data()) : nullptr;
}
template <class T>
T* mutable_or_null(const Tensor& t) {
  return t.defined() ? static_cast<T*>(t.raw_data()) : nullptr;
}

// Two sums carried together through one reduction.
template <class C>
struct Pair {
  C a, b;
};
template <class C>
__device__ __forceinline__ Pair<C> shfl_xor(Pair<C> v, int mask) {
  return {__shfl_xor_sync(kFullMask, v.a, mask), __shfl_xor_sync(kFullMask, v.b, mask)};
}
struct AddPair {
  template <class C> __device__ __forceinline__ Pair<C> operator()(Pair<C> x, Pair<C> y) const {
    return {x.a + y.a, x.b + y.b};
  }
};

// ---- forward ----
// mean = sum(x) / d (layer_norm only), rstd = 1 / sqrt(sum((x - mean)^2) / d + eps), then
// y = (x - mean) * rstd * weight + bias. Two passes for the statistics rather than one (sum and sum
// of squares) so a row far from zero — mean 1000, spread 0.001 — loses no precision.
//
// With a residual, the row is first summed (rounded to T, as add() rounds) into `sum`, and the later
// passes read the sum back: each thread reads only the elements it wrote, so no barrier is needed, and
// the re-reads come from cache.
template <bool kWholeBlock, bool kCentred, class T>
__global__ void norm_forward_kernel(T* y, compute_t<T>* mean_out, compute_t<T>* rstd_out, const T* x,
                                    const T* residual, T* sum, const T* weight, const T* bias, int64_t rows,
                                    int64_t d, double eps) {
  using C = compute_t<T>;
  using Group = RowGroup<kWholeBlock>;
  const int64_t r = Group::row();
  if (r >= rows) return;
  const int first = Group::rank(), step = Group::size();
  const T* xr = x + r * d;
  T* yr = y + r * d;
  const T* rr = residual ? residual + r * d : nullptr;
  T* sr = residual ? sum + r * d : nullptr;
  // weight and bias are indexed by column, so their phase is the base's: rows whose phase differs
  // (d not a multiple of the vector width) take the scalar path.
  const RowSplit split = split_row(xr, d, same_phase(xr, static_cast<const T*>(yr), rr, static_cast<const T*>(sr),
                                                     weight, bias));
  if (residual) {
    for_each_chunk<T>(split, first, step, [&](int64_t i, auto width) {
      constexpr int W = decltype(width)::value;
      C a[W], b[W];
      load_chunk<W>(xr, i, a);
      load_chunk<W>(rr, i, b);
#pragma unroll
      for (int j = 0; j < W; ++j) a[j] += b[j];
      store_chunk<W>(sr, i, a);
    });
    xr = sr;
  }

  C mean = 0;
  if constexpr (kCentred) {
    C total = 0;
    for_each_chunk<T>(split, first, step, [&](int64_t i, auto width) {
      constexpr int W = decltype(width)::value;
      C v[W];
      load_chunk<W>(xr, i, v);
#pragma unroll
      for (int j = 0; j < W; ++j) total += v[j];
    });
    mean = Group::reduce(total, Sum{}, C(0)) / C(d);
  }
  C squares = 0;
  for_each_chunk<T>(split, first, step, [&](int64_t i, auto width) {
    constexpr int W = decltype(width)::value;
    C v[W];
    load_chunk<W>(xr, i, v);
#pragma unroll
    for (int j = 0; j < W; ++j) squares += (v[j] - mean) * (v[j] - mean);
  });
  const C rstd = C(1) / dev_sqrt(Group::reduce(squares, Sum{}, C(0)) / C(d) + C(eps));

  for_each_chunk<T>(split, first, step, [&](int64_t i, auto width) {
    constexpr int W = decltype(width)::value;
    C v[W], w[W], b[W];
    load_chunk<W>(xr, i, v);
    if (weight) load_chunk<W>(weight, i, w);
    if (bias) load_chunk<W>(bias, i, b);
#pragma unroll
    for (int j = 0; j < W; ++j) {
      v[j] = (v[j] - mean) * rstd;
      if (weight) v[j] *= w[j];
      if (bias) v[j] += b[j];
    }
    store_chunk<W>(yr, i, v);
  });
  if (first == 0) {
    if constexpr (kCentred) mean_out[r] = mean;
    rstd_out[r] = rstd;
  }
}

// ---- input gradient ----
// grad_x = rstd * (gw - mean(gw) - x_hat * mean(gw * x_hat)), gw = grad_y * weight; rms_norm (no
// mean) drops the mean(gw) term, as its forward subtracts no mean.
// grad_sum (may be null) is added after rounding, as a separate add of the two gradients would — and
// with an add nvcc may not contract into an FMA with the product before it (it does so by default):
// the separate add sees the rounded product.
__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add_rn(double a, double b) { return __dadd_rn(a, b); }

template <bool kWholeBlock, class T>
__global__ void norm_backward_input_kernel(T* grad_x, const T* grad_y, const T* x, const T* weight,
                                           const compute_t<T>* mean, const compute_t<T>* rstd, const T* grad_sum,
                                           int64_t rows, int64_t d) {
  using C = compute_t<T>;
  using Group = RowGroup<kWholeBlock>;
  const int64_t r = Group::row();
  if (r >= rows) return;
  const int first = Group::rank(), step = Group::size();
  const T* xr = x + r * d;
  const T* gr = grad_y + r * d;
  T* dxr = grad_x + r * d;
  const T* sr = grad_sum ? grad_sum + r * d : nullptr;
  const C m = mean ? mean[r] : C(0), s = rstd[r];
  const RowSplit split = split_row(xr, d, same_phase(xr, gr, static_cast<const T*>(dxr), sr, weight));

  // gw = grad_y * weight for W elements at i.
  const auto load_gw = [&](int64_t i, auto width, C (&gw)[decltype(width)::value]) {
    constexpr int W = decltype(width)::value;
    load_chunk<W>(gr, i, gw);
    if (weight) {
      C w[W];
      load_chunk<W>(weight, i, w);
#pragma unroll
      for (int j = 0; j < W; ++j) gw[j] *= w[j];
    }
  };

  Pair<C> sums{0, 0};  // sum(gw), sum(gw * x_hat)
  for_each_chunk<T>(split, first, step, [&](int64_t i, auto width) {
    constexpr int W = decltype(width)::value;
    C gw[W], v[W];
    load_gw(i, width, gw);
    load_chunk<W>(xr, i, v);
#pragma unroll
    for (int j = 0; j < W; ++j) {
      sums.a += gw[j];
      sums.b += gw[j] * ((v[j] - m) * s);
    }
  });
  sums = Group::reduce(sums, AddPair{}, Pair<C>{0, 0});
  const C mean_gw = mean ? sums.a / C(d) : C(0), mean_gw_xhat = sums.b / C(d);

  for_each_chunk<T>(split, first, step, [&](int64_t i, auto width) {
    constexpr int W = decltype(width)::value;
    C gw[W], v[W], out[W];
    load_gw(i, width, gw);
    load_chunk<W>(xr, i, v);
#pragma unroll
    for (int j = 0; j < W; ++j) out[j] = s * (gw[j] - mean_gw - (v[j] - m) * s * mean_gw_xhat);
    if (sr) {
      C other[W];
      load_chunk<W>(sr, i, other);
#pragma unroll
      for (int j = 0; j < W; ++j) out[j] = add_rn(to_compute(from_compute<T>(out[j])), other[j]);
    }
    store_chunk<W>(dxr, i, out);
  });
}

// ---- parameter gradients ----

// Stage one: block (32, kRowsPerBlock) covers 32 * W columns and one chunk of rows; thread (tx, ty)
// sums columns [(32 * blockIdx.x + tx) * W, + W) over rows ty, ty + kRowsPerBlock, ... of the chunk,
// then the kRowsPerBlock sums are added in order. W is the vector width when d is a whole number of
// vectors and both bases are 16-byte aligned (every row then is): a warp reads 512 contiguous bytes
// of a row per load, not 64 (bf16); otherwise W = 1.
template <int W, class T>
__global__ void norm_params_partial_kernel(compute_t<T>* partial_w, compute_t<T>* partial_b, const T* grad_y,
                                           const T* x, const compute_t<T>* mean, const compute_t<T>* rstd,
                                           int64_t rows, int64_t d, int64_t chunk) {
  using C = compute_t<T>;
  __shared__ C shared_w[kRowsPerBlock][kWarp][W], shared_b[kRowsPerBlock][kWarp][W];
  const int tx = int(threadIdx.x), ty = int(threadIdx.y);
  const int64_t j = (int64_t(blockIdx.x) * kWarp + tx) * W;
  const int64_t begin = int64_t(blockIdx.y) * chunk;
  const int64_t end = begin + chunk < rows ? begin + chunk : rows;
  C acc_w[W], acc_b[W];
#pragma unroll
  for (int k = 0; k < W; ++k) acc_w[k] = acc_b[k] = C(0);
  if (j < d) {
    for (int64_t r = begin + ty; r < end; r += kRowsPerBlock) {
      C g[W], v[W];
      load_chunk<W>(grad_y, r * d + j, g);
      load_chunk<W>(x, r * d + j, v);
      const C m = mean ? mean[r] : C(0), s = rstd[r];
#pragma unroll
      for (int k = 0; k < W; ++k) {
        acc_w[k] += g[k] * ((v[k] - m) * s);
        acc_b[k] += g[k];
      }
    }
  }
#pragma unroll
  for (int k = 0; k < W; ++k) {
    shared_w[ty][tx][k] = acc_w[k];
    shared_b[ty][tx][k] = acc_b[k];
  }
  __syncthreads();
  if (ty == 0 && j < d) {
    for (int row = 1; row < kRowsPerBlock; ++row) {
#pragma unroll
      for (int k = 0; k < W; ++k) {
        acc_w[k] += shared_w[row][tx][k];
        acc_b[k] += shared_b[row][tx][k];
      }
    }
#pragma unroll
    for (int k = 0; k < W; ++k) {
      if (partial_w) partial_w[int64_t(blockIdx.y) * d + j + k] = acc_w[k];
      if (partial_b) partial_b[int64_t(blockIdx.y) * d + j + k] = acc_b[k];
    }
  }
}

// Stage two: column j adds its chunks' partial sums in chunk order.
template <class T>
__global__ void norm_params_finish_kernel(T* grad_weight, T* grad_bias, const compute_t<T>* partial_w,
                                          const compute_t<T>* partial_b, int64_t d, int64_t chunks) {
  using C = compute_t<T>;
  BRIGADE_GRID_STRIDE_LOOP(j, d, int64_t) {
    if (grad_weight) {
      C acc = 0;
      for (int64_t c = 0; c < chunks; ++c) acc += partial_w[c * d + j];
      grad_weight[j] = from_compute<T>(acc);
    }
    if (grad_bias) {
      C acc = 0;
      for (int64_t c = 0; c < chunks; ++c) acc += partial_b[c * d + j];
      grad_bias[j] = from_compute<T>(acc);
    }
  }
}

// ---- host side ----

void forward(const char* op, const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x,
             const Tensor& weight, const Tensor& bias, double eps, const Tensor& residual, const Tensor& sum) {
  const int64_t d = x.size(-1);
  const int64_t rows = d == 0 ? 0 : x.numel() / d;
  if (rows == 0) return;
  cudaStream_t stream = stream_for(x);
  visit_floating(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    T* yp = static_cast<T*>(y.raw_data());
    C* mp = mutable_or_null<C>(mean);
    C* rp = static_cast<C*>(rstd.raw_data());
    const T* xp = static_cast<const T*>(x.raw_data());
    const T* wp = data_or_null<T>(weight);
    const T* bp = data_or_null<T>(bias);
    const T* res = data_or_null<T>(residual);
    T* sp = residual.defined() ? static_cast<T*>(sum.raw_data()) : nullptr;
    launch_rows(rows, d, [&](auto whole_block, dim3 grid, dim3 block) {
      if (mean.defined())
        norm_forward_kernel<decltype(whole_block)::value, true>
            <<<grid, block, 0, stream>>>(yp, mp, rp, xp, res, sp, wp, bp, rows, d, eps);
      else
        norm_forward_kernel<decltype(whole_block)::value, false>
            <<<grid, block, 0, stream>>>(yp, mp, rp, xp, res, sp, wp, bp, rows, d, eps);
      BRIGADE_CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace

void layer_norm(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& weight,
                const Tensor& bias, double eps, const Tensor& residual, const Tensor& sum) {
  forward("layer_norm", y, mean, rstd, x, weight, bias, eps, residual, sum);
}

void rms_norm(const Tensor& y, const Tensor& rstd, const Tensor& x, const Tensor& weight, double eps) {
  forward("rms_norm", y, Tensor(), rstd, x, weight, Tensor(), eps, Tensor(), Tensor());
}

void norm_backward_input(const Tensor& grad_x, const Tensor& grad_y, const Tensor& x, const Tensor& weight,
                         const Tensor& mean, const Tensor& rstd, const Tensor& grad_sum) {
  const int64_t d = x.size(-1);
  const int64_t rows = d == 0 ? 0 : x.numel() / d;
  if (rows == 0) return;
  cudaStream_t stream = stream_for(x);
  visit_floating(x.dtype(), "norm_backward_input", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    T* gx = static_cast<T*>(grad_x.raw_data());
    const T* gy = static_cast<const T*>(grad_y.raw_data());
    const T* xp = static_cast<const T*>(x.raw_data());
    const T* wp = data_or_null<T>(weight);
    const C* mp = data_or_null<C>(mean);
    const C* rp = static_cast<const C*>(rstd.raw_data());
    const T* gs = data_or_null<T>(grad_sum);
    launch_rows(rows, d, [&](auto whole_block, dim3 grid, dim3 block) {
      norm_backward_input_kernel<decltype(whole_block)::value>
          <<<grid, block, 0, stream>>>(gx, gy, xp, wp, mp, rp, gs, rows, d);
      BRIGADE_CUDA_CHECK_LAUNCH();
    });
  });
}

void norm_backward_params(const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& grad_y, const Tensor& x,
                          const Tensor& mean, const Tensor& rstd) {
  const int64_t d = x.size(-1);
  const int64_t rows = d == 0 ? 0 : x.numel() / d;
  if (d == 0 || (!grad_weight.defined() && !grad_bias.defined())) return;
  const Device device = x.device();
  cudaStream_t stream = stream_for(x);
  visit_floating(x.dtype(), "norm_backward_params", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    constexpr int V = kVecWidth<T>;
    const T* gy = static_cast<const T*>(grad_y.raw_data());
    const T* xp = static_cast<const T*>(x.raw_data());
    const bool vectors = d % V == 0 && is_aligned(gy, 16) && is_aligned(xp, 16);
    // Chunks of rows: enough blocks in stage one to fill the GPU, fixed by the shape alone.
    const int64_t column_blocks = ceil_div(d, kWarp * (vectors ? V : 1));
    const int64_t chunks = std::clamp<int64_t>(std::min(ceil_div(kTargetParamBlocks, column_blocks),
                                                        rows / kMinRowsPerChunk),
                                               1, 65535);
    const int64_t chunk = std::max<int64_t>(1, ceil_div(rows, chunks));
    const int64_t used_chunks = std::max<int64_t>(1, ceil_div(rows, chunk));

    const Tensor memory = scratch(device, 2 * sizeof(C) * size_t(used_chunks) * size_t(d));
    C* partial_w = grad_weight.defined() ? static_cast<C*>(memory.raw_data()) : nullptr;
    C* partial_b = grad_bias.defined() ? static_cast<C*>(memory.raw_data()) + used_chunks * d : nullptr;
    const C* mp = data_or_null<C>(mean);
    const C* rp = static_cast<const C*>(rstd.raw_data());

    const dim3 grid{unsigned(column_blocks), unsigned(used_chunks)}, block{kWarp, kRowsPerBlock};
    if (vectors)
      norm_params_partial_kernel<V, T><<<grid, block, 0, stream>>>(partial_w, partial_b, gy, xp, mp, rp, rows, d,
                                                                   chunk);
    else
      norm_params_partial_kernel<1, T><<<grid, block, 0, stream>>>(partial_w, partial_b, gy, xp, mp, rp, rows, d,
                                                                   chunk);
    BRIGADE_CUDA_CHECK_LAUNCH();
    norm_params_finish_kernel<T><<<grid_for(d, device), kThreads, 0, stream>>>(
        mutable_or_null<T>(grad_weight), mutable_or_null<T>(grad_bias), partial_w, partial_b, d, used_chunks);
    BRIGADE_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace brigade::cuda
