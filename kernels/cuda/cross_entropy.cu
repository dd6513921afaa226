// CUDA kernels: cross entropy over [N, C] logits, fused, without ever materialising the softmax.
//
// Forward, one warp per row (a block for rows longer than 1024 classes — a language model's vocab):
// a single read of the row gives its log-sum-exp through the online (max, sum) pair, and the row's
// loss is lse - logits[target]. Each row writes its lse (saved for backward) and its loss; a second
// one-block kernel adds the losses in a fixed order, so the scalar is deterministic.
//
// Backward, the same row layout: grad = g * scale * (exp(logits - lse) - onehot(target)), the
// softmax recomputed from the logits and the saved lse — one read of the logits, one write of the
// gradient, no probabilities stored in between.
//
// Why fast: the logits are read and the gradient written 16 bytes at a time (row_vectors.cuh); a
// vocabulary that is not a multiple of 8 (GPT-2's 50257) gives each row its own phase, which the
// scalar head and tail absorb, so every row is vectorised. The forward is one pass over the logits
// (online max and sum, one rescale per vector). Expected on an H200: 85-90% of the copy bandwidth
// at GPT-2's [B*T, 50304] (unmeasured yet; `brigade bench kernels` has the rows). Limits: one exp
// per element in each direction, and a block per row at 256 threads means the row's final reduction
// is a barrier the other blocks on the SM must cover.
//
// On the GPU (the contract both backends share: kernels/twins/cross_entropy.inc):
// logits [N, C] contiguous in f32, f64, bf16 or f16 (16-bit data computes in f32); targets contiguous
// i64 [N], checked by the op layer. loss, grad_loss and lse [N] have the compute dtype: f32 (f64 for
// f64 logits). The loss sums the rows in a fixed order: deterministic.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/online_softmax.cuh"
#include "kernels/cuda/row_vectors.cuh"

namespace brigade::cuda {
namespace {

constexpr int kSumThreads = 1024;        // the one block that adds the row losses

template <bool kWholeBlock, class T>
__global__ void cross_entropy_rows_kernel(compute_t<T>* lse, compute_t<T>* row_loss, const T* logits,
                                          const int64_t* targets, int64_t n, int64_t c, int64_t ignore_index) {
  using C = compute_t<T>;
  using Group = RowGroup<kWholeBlock>;
  const int64_t r = Group::row();
  if (r >= n) return;
  const T* x = logits + r * c;
  MaxSum<C> stats = empty_max_sum<C>();
  for_each_chunk<T>(split_row(x, c, true), Group::rank(), Group::size(), [&](int64_t j, auto width) {
    constexpr int W = decltype(width)::value;
    C v[W];
    load_chunk<W>(x, j, v);
    stats = push_chunk(stats, v);
  });
  stats = Group::reduce(stats, MergeMaxSum{}, empty_max_sum<C>());
  if (Group::rank() == 0) {
    const C row_lse = stats.max + dev_log(stats.sum);
    const int64_t target = targets[r];
    lse[r] = row_lse;
    row_loss[r] = target == ignore_index ? C(0) : row_lse - to_compute(x[target]);
  }
}

// loss = scale * sum of the row losses. Ignored rows contribute their 0.
// The factor itself (see ops::LossScale): f64 as on the host, so both forms give the same bits.
__device__ __forceinline__ double resolve(const ops::LossScale& s) {
  if (s.device_count == nullptr) return s.value;
  const int64_t count = *s.device_count;
  return count > 0 ? 1.0 / double(count) : 0.0;
}

// The loss is written in the compute dtype (f32 for 16-bit logits): a 16-bit loss would keep three
// significant digits.
template <class C>
__global__ void sum_losses_kernel(C* loss, const C* row_loss, int64_t n, ops::LossScale loss_scale) {
  const double scale = resolve(loss_scale);
  C total = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) total += row_loss[i];
  total = block_reduce(total, Sum{}, C(0));
  if (threadIdx.x == 0) *loss = C(double(total) * scale);
}

template <bool kWholeBlock, class T>
__global__ void cross_entropy_backward_kernel(T* grad, const T* logits, const int64_t* targets,
                                              const compute_t<T>* lse, const compute_t<T>* grad_loss, int64_t n, int64_t c,
                                              int64_t ignore_index, ops::LossScale loss_scale) {
  using C = compute_t<T>;
  using Group = RowGroup<kWholeBlock>;
  const double scale = resolve(loss_scale);
  const int64_t r = Group::row();
  if (r >= n) return;
  T* g = grad + r * c;
  const T* x = logits + r * c;
  const int64_t target = targets[r];
  const bool ignored = target == ignore_index;
  const C s = C(double(*grad_loss) * scale), row_lse = lse[r];
  const RowSplit split = split_row(x, c, same_phase(x, static_cast<const T*>(g)));
  for_each_chunk<T>(split, Group::rank(), Group::size(), [&](int64_t j, auto width) {
    constexpr int W = decltype(width)::value;
    C v[W];
    if (ignored) {
#pragma unroll
      for (int k = 0; k < W; ++k) v[k] = C(0);
    } else {
      load_chunk<W>(x, j, v);
#pragma unroll
      for (int k = 0; k < W; ++k) {
        v[k] = s * dev_exp(v[k] - row_lse);
        if (j + k == target) v[k] -= s;  // as the CPU: s * p - s, not s * (p - 1)
      }
    }
    store_chunk<W>(g, j, v);
  });
}

}  // namespace

void cross_entropy(const Tensor& loss, const Tensor& lse, const Tensor& logits, const Tensor& targets,
                   int64_t ignore_index, const ops::LossScale& scale) {
  const int64_t n = logits.size(0), c = logits.size(1);
  const Device device = logits.device();
  cudaStream_t stream = stream_for(logits);
  visit_floating(logits.dtype(), "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const Tensor losses = scratch(device, sizeof(C) * size_t(std::max<int64_t>(n, 1)));
    C* row_loss = static_cast<C*>(losses.raw_data());
    if (n > 0) {
      launch_rows(n, c, [&](auto whole_block, dim3 grid, dim3 block) {
        cross_entropy_rows_kernel<decltype(whole_block)::value><<<grid, block, 0, stream>>>(
            static_cast<C*>(lse.raw_data()), row_loss, static_cast<const T*>(logits.raw_data()),
            targets.data<int64_t>(), n, c, ignore_index);
        BRIGADE_CUDA_CHECK_LAUNCH();
      });
    }
    sum_losses_kernel<C><<<1, kSumThreads, 0, stream>>>(static_cast<C*>(loss.raw_data()), row_loss, n, scale);
    BRIGADE_CUDA_CHECK_LAUNCH();
  });
}

void cross_entropy_backward(const Tensor& grad_logits, const Tensor& logits, const Tensor& targets, const Tensor& lse,
                            const Tensor& grad_loss, int64_t ignore_index, const ops::LossScale& scale) {
  const int64_t n = logits.size(0), c = logits.size(1);
  if (n == 0 || c == 0) return;
  cudaStream_t stream = stream_for(logits);
  visit_floating(logits.dtype(), "cross_entropy_backward", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    launch_rows(n, c, [&](auto whole_block, dim3 grid, dim3 block) {
      cross_entropy_backward_kernel<decltype(whole_block)::value><<<grid, block, 0, stream>>>(
          static_cast<T*>(grad_logits.raw_data()), static_cast<const T*>(logits.raw_data()), targets.data<int64_t>(),
          static_cast<const C*>(lse.raw_data()), static_cast<const C*>(grad_loss.raw_data()), n, c, ignore_index,
          scale);
      BRIGADE_CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace brigade::cuda
