// CUDA kernels: layer_norm and rms_norm over the last dim, forward and backward.
//
// Forward and input gradient work row by row: a warp per row (a block for rows longer than 1024),
// a few reductions over the row, then one write pass. The row is read several times; after the
// first read it comes from cache, so the kernels stay memory-bound on one read and one write.
//
// The parameter gradients sum over rows instead: grad_weight[j] = sum_r grad_y[r, j] * x_hat[r, j].
// Threads take columns (a warp reads 32 neighbouring columns of a row at once) and the rows are cut
// into chunks: stage one writes one partial sum per (chunk, column) to scratch memory, stage two adds
// each column's partials in chunk order. The chunking depends only on the shape, so the result has
// the same bits on every run — no atomics.
//
// On the GPU (the contract both backends share: kernels/twins/norm.inc):
// Contiguous [rows, D] data in f32, f64, bf16 or f16 (16-bit data computes in f32); weight, bias and
// the gradients share x's dtype; mean and rstd [rows] are f32 (f64 for f64 data). Deterministic: the
// parameter gradients sum over rows in a fixed two-stage order, without atomics.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kernels.h"

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
  if (residual) {
    T* sr = sum + r * d;
    const T* rr = residual + r * d;
    for (int64_t i = first; i < d; i += step) sr[i] = from_compute<T>(to_compute(xr[i]) + to_compute(rr[i]));
    xr = sr;
  }

  C mean = 0;
  if constexpr (kCentred) {
    C total = 0;
    for (int64_t i = first; i < d; i += step) total += to_compute(xr[i]);
    mean = Group::reduce(total, Sum{}, C(0)) / C(d);
  }
  C squares = 0;
  for (int64_t i = first; i < d; i += step) {
    const C v = to_compute(xr[i]) - mean;
    squares += v * v;
  }
  const C rstd = C(1) / dev_sqrt(Group::reduce(squares, Sum{}, C(0)) / C(d) + C(eps));

  for (int64_t i = first; i < d; i += step) {
    C v = (to_compute(xr[i]) - mean) * rstd;
    if (weight) v *= to_compute(weight[i]);
    if (bias) v += to_compute(bias[i]);
    yr[i] = from_compute<T>(v);
  }
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
  const C m = mean ? mean[r] : C(0), s = rstd[r];

  Pair<C> sums{0, 0};  // sum(gw), sum(gw * x_hat)
  for (int64_t i = first; i < d; i += step) {
    const C gw = weight ? to_compute(gr[i]) * to_compute(weight[i]) : to_compute(gr[i]);
    sums.a += gw;
    sums.b += gw * ((to_compute(xr[i]) - m) * s);
  }
  sums = Group::reduce(sums, AddPair{}, Pair<C>{0, 0});
  const C mean_gw = mean ? sums.a / C(d) : C(0), mean_gw_xhat = sums.b / C(d);

  for (int64_t i = first; i < d; i += step) {
    const C gw = weight ? to_compute(gr[i]) * to_compute(weight[i]) : to_compute(gr[i]);
    const T g = from_compute<T>(s * (gw - mean_gw - (to_compute(xr[i]) - m) * s * mean_gw_xhat));
    dxr[i] = grad_sum ? from_compute<T>(add_rn(to_compute(g), to_compute(grad_sum[r * d + i]))) : g;
  }
}

// ---- parameter gradients ----

// Stage one: block (32, kRowsPerBlock) covers 32 columns and one chunk of rows; thread (tx, ty) sums
// rows ty, ty + kRowsPerBlock, ... of the chunk, then the kRowsPerBlock sums are added in order.
template <class T>
__global__ void norm_params_partial_kernel(compute_t<T>* partial_w, compute_t<T>* partial_b, const T* grad_y,
                                           const T* x, const compute_t<T>* mean, const compute_t<T>* rstd,
                                           int64_t rows, int64_t d, int64_t chunk) {
  using C = compute_t<T>;
  __shared__ C shared_w[kRowsPerBlock][kWarp], shared_b[kRowsPerBlock][kWarp];
  const int64_t j = int64_t(blockIdx.x) * kWarp + threadIdx.x;
  const int64_t begin = int64_t(blockIdx.y) * chunk;
  const int64_t end = begin + chunk < rows ? begin + chunk : rows;
  C acc_w = 0, acc_b = 0;
  if (j < d) {
    for (int64_t r = begin + threadIdx.y; r < end; r += kRowsPerBlock) {
      const C g = to_compute(grad_y[r * d + j]);
      const C m = mean ? mean[r] : C(0);
      acc_w += g * ((to_compute(x[r * d + j]) - m) * rstd[r]);
      acc_b += g;
    }
  }
  shared_w[threadIdx.y][threadIdx.x] = acc_w;
  shared_b[threadIdx.y][threadIdx.x] = acc_b;
  __syncthreads();
  if (threadIdx.y == 0 && j < d) {
    for (int k = 1; k < kRowsPerBlock; ++k) {
      acc_w += shared_w[k][threadIdx.x];
      acc_b += shared_b[k][threadIdx.x];
    }
    if (partial_w) partial_w[int64_t(blockIdx.y) * d + j] = acc_w;
    if (partial_b) partial_b[int64_t(blockIdx.y) * d + j] = acc_b;
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
    // Chunks of rows: enough blocks in stage one to fill the GPU, fixed by the shape alone.
    const int64_t column_blocks = ceil_div(d, kWarp);
    const int64_t chunks = std::clamp<int64_t>(std::min(ceil_div(kTargetParamBlocks, column_blocks),
                                                        rows / kMinRowsPerChunk),
                                               1, 65535);
    const int64_t chunk = std::max<int64_t>(1, ceil_div(rows, chunks));
    const int64_t used_chunks = std::max<int64_t>(1, ceil_div(rows, chunk));

    const Tensor memory = scratch(device, 2 * sizeof(C) * size_t(used_chunks) * size_t(d));
    C* partial_w = grad_weight.defined() ? static_cast<C*>(memory.raw_data()) : nullptr;
    C* partial_b = grad_bias.defined() ? static_cast<C*>(memory.raw_data()) + used_chunks * d : nullptr;
    const T* gy = static_cast<const T*>(grad_y.raw_data());
    const T* xp = static_cast<const T*>(x.raw_data());
    const C* mp = data_or_null<C>(mean);
    const C* rp = static_cast<const C*>(rstd.raw_data());

    const dim3 grid{unsigned(column_blocks), unsigned(used_chunks)}, block{kWarp, kRowsPerBlock};
    norm_params_partial_kernel<T><<<grid, block, 0, stream>>>(partial_w, partial_b, gy, xp, mp, rp, rows, d, chunk);
    BRIGADE_CUDA_CHECK_LAUNCH();
    norm_params_finish_kernel<T><<<grid_for(d, device), kThreads, 0, stream>>>(
        mutable_or_null<T>(grad_weight), mutable_or_null<T>(grad_bias), partial_w, partial_b, d, used_chunks);
    BRIGADE_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace brigade::cuda
