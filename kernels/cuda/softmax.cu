// CUDA kernels: softmax and log-softmax along one dim, forward and backward.
//
// Every kernel works on *lines*: the elements whose indices differ only in `dim`. A line is
// reduced to one or two numbers (forward: its maximum and sum of exponentials; backward: a dot
// product or a sum) and then every element of the line is written from them. Who owns a line
// depends on where its elements sit in memory:
//
//   rows      the line is contiguous in the input (dim is the innermost dim, the usual case): one
//             warp per line, or one block for lines longer than 1024, so neighbouring lanes read
//             neighbouring elements;
//   columns   the line is strided (softmax over dim 1 of [N, C, H, W]): one thread per line, so
//             neighbouring threads read neighbouring lines, which is where the contiguous memory is.
//
// The forward pass reads the line once to find both the maximum and the sum ("online softmax"): a
// running sum of exp(x - m) is rescaled by exp(m_old - m_new) whenever the maximum grows, and two
// partial (max, sum) pairs merge the same way. Subtracting the maximum keeps every exponent <= 0, so
// nothing overflows, exactly as the CPU does it. A second read of the line writes the outputs.
//
// Why the rows kernels are fast: contiguous lines move 16 bytes per load and store (8 bf16, 4 f32;
// row_vectors.cuh), with a scalar head and tail for lines that do not start or end on a 16-byte
// boundary; the maximum is taken over a whole vector before the running sum is rescaled, one extra
// exp per vector rather than per element. The second read of a line comes from L1 (a warp's line of
// 1024 bf16 is 2 KB; a block's line of 2048 is 4 KB), so DRAM sees one read and one write.
// Expected: 80-90% of the copy bandwidth for bf16 lines of 1-4K on an H200 (unmeasured there yet;
// `brigade bench kernels` reports it). Limits: one exp per element in each pass (~2 exps per 4 bytes
// moved in bf16, near the SFU's rate at full bandwidth), and lines shorter than a vector per lane
// leave lanes idle. The columns kernels (strided lines) stay one element per thread.
//
// On the GPU (the contract both backends share: kernels/twins/softmax.inc):
// f32, f64, bf16 and f16 directly (16-bit data computes in f32). Inputs may have any strides;
// outputs are whatever view the op layer passes (contiguous in practice). Each line along `dim` is
// owned by one warp, one block or one thread, so its sums run in a fixed order: deterministic.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/online_softmax.cuh"
#include "kernels/cuda/row_vectors.cuh"

namespace brigade::cuda {
namespace {

// Where the lines are: each operand's layout over the shape with `dim` set to 1 (one element per
// line: its first), each operand's step along `dim`, and the line count and length.
template <int N>
struct Lines {
  StridedLayout<N> starts;
  int64_t step[N];
  int64_t count;
  int64_t length;
};

template <int N>
Lines<N> make_lines(const char* op, const std::array<const Tensor*, N>& operands, int64_t dim) {
  Lines<N> lines;
  Shape shape = operands[0]->shape();
  lines.length = shape[size_t(dim)];
  shape[size_t(dim)] = 1;
  lines.count = shape_numel(shape);
  std::array<Tensor, N> firsts;
  std::array<const Tensor*, N> pointers;
  for (int k = 0; k < N; ++k) {
    const Tensor& t = *operands[size_t(k)];
    firsts[size_t(k)] = make_view(t, shape, t.strides(), t.offset());
    pointers[size_t(k)] = &firsts[size_t(k)];
    lines.step[k] = t.strides()[size_t(dim)];
  }
  lines.starts = make_layout<N>(op, shape, pointers);
  return lines;
}

// ---- forward ----

// The output for input v, given its line's statistics: exp(v - max) / sum, or (v - max) - log(sum).
template <bool kLog, class C>
struct ForwardWriter {
  C max, factor;  // factor: 1 / sum, or log(sum)
  __device__ __forceinline__ explicit ForwardWriter(MaxSum<C> s)
      : max(s.max), factor(kLog ? dev_log(s.sum) : C(1) / s.sum) {}
  __device__ __forceinline__ C operator()(C v) const { return kLog ? (v - max) - factor : dev_exp(v - max) * factor; }
};

template <bool kLog, bool kBlockPerLine, class T>
__global__ void softmax_rows_kernel(T* y, const T* x, Lines<2> lines) {
  using C = compute_t<T>;
  using Group = RowGroup<kBlockPerLine>;
  const int64_t line = Group::row();
  if (line >= lines.count) return;  // never splits a block-per-line block; a warp leaves whole
  const int first = Group::rank(), threads = Group::size();
  int64_t off[2];
  lines.starts.offsets(line, off);
  T* yl = y + off[0];
  const T* xl = x + off[1];
  const int64_t ys = lines.step[0], xs = lines.step[1];
  // Vectors when both lines are contiguous and equally aligned (a reversed line, step -1, is not).
  const RowSplit split = split_row(xl, lines.length, xs == 1 && ys == 1 && same_phase(xl, yl));

  MaxSum<C> stats = empty_max_sum<C>();
  for_each_chunk<T>(split, first, threads, [&](int64_t i, auto width) {
    constexpr int W = decltype(width)::value;
    C v[W];
    if constexpr (W == 1) v[0] = to_compute(xl[i * xs]);
    else load_chunk<W>(xl, i, v);
    stats = push_chunk(stats, v);
  });
  stats = Group::reduce(stats, MergeMaxSum{}, empty_max_sum<C>());

  const ForwardWriter<kLog, C> write(stats);
  for_each_chunk<T>(split, first, threads, [&](int64_t i, auto width) {
    constexpr int W = decltype(width)::value;
    if constexpr (W == 1) {
      yl[i * ys] = from_compute<T>(write(to_compute(xl[i * xs])));
    } else {
      C v[W];
      load_chunk<W>(xl, i, v);
#pragma unroll
      for (int j = 0; j < W; ++j) v[j] = write(v[j]);
      store_chunk<W>(yl, i, v);
    }
  });
}

template <bool kLog, class T>
__global__ void softmax_columns_kernel(T* y, const T* x, Lines<2> lines) {
  using C = compute_t<T>;
  BRIGADE_GRID_STRIDE_LOOP(line, lines.count, int64_t) {
    int64_t off[2];
    lines.starts.offsets(line, off);
    T* yl = y + off[0];
    const T* xl = x + off[1];
    const int64_t ys = lines.step[0], xs = lines.step[1];
    MaxSum<C> stats = empty_max_sum<C>();
    for (int64_t i = 0; i < lines.length; ++i) stats = push(stats, to_compute(xl[i * xs]));
    const ForwardWriter<kLog, C> write(stats);
    for (int64_t i = 0; i < lines.length; ++i) yl[i * ys] = from_compute<T>(write(to_compute(xl[i * xs])));
  }
}

// ---- backward: one sum per line, then grad_x ----
//   softmax:      grad_x = y * (grad_y - sum(grad_y * y))
//   log_softmax:  grad_x = grad_y - exp(y) * sum(grad_y)

template <bool kLog, class C>
__device__ __forceinline__ C backward_term(C g, C y) {
  return kLog ? g : g * y;
}
template <bool kLog, class C>
__device__ __forceinline__ C backward_value(C g, C y, C total) {
  return kLog ? g - dev_exp(y) * total : y * (g - total);
}

template <bool kLog, bool kBlockPerLine, class T>
__global__ void softmax_backward_rows_kernel(T* grad_x, const T* grad_y, const T* y, Lines<3> lines) {
  using C = compute_t<T>;
  using Group = RowGroup<kBlockPerLine>;
  const int64_t line = Group::row();
  if (line >= lines.count) return;
  const int first = Group::rank(), threads = Group::size();
  int64_t off[3];
  lines.starts.offsets(line, off);
  T* gx = grad_x + off[0];
  const T* gy = grad_y + off[1];
  const T* yl = y + off[2];
  const int64_t xs = lines.step[0], gs = lines.step[1], ys = lines.step[2];
  const RowSplit split =
      split_row(yl, lines.length, xs == 1 && gs == 1 && ys == 1 && same_phase(yl, gy, static_cast<const T*>(gx)));

  C total = 0;
  for_each_chunk<T>(split, first, threads, [&](int64_t i, auto width) {
    constexpr int W = decltype(width)::value;
    C g[W], v[W];
    if constexpr (W == 1) {
      g[0] = to_compute(gy[i * gs]);
      v[0] = to_compute(yl[i * ys]);
    } else {
      load_chunk<W>(gy, i, g);
      load_chunk<W>(yl, i, v);
    }
#pragma unroll
    for (int j = 0; j < W; ++j) total += backward_term<kLog>(g[j], v[j]);
  });
  total = Group::reduce(total, Sum{}, C(0));
  for_each_chunk<T>(split, first, threads, [&](int64_t i, auto width) {
    constexpr int W = decltype(width)::value;
    if constexpr (W == 1) {
      gx[i * xs] = from_compute<T>(backward_value<kLog>(to_compute(gy[i * gs]), to_compute(yl[i * ys]), total));
    } else {
      C g[W], v[W];
      load_chunk<W>(gy, i, g);
      load_chunk<W>(yl, i, v);
#pragma unroll
      for (int j = 0; j < W; ++j) g[j] = backward_value<kLog>(g[j], v[j], total);
      store_chunk<W>(gx, i, g);
    }
  });
}

template <bool kLog, class T>
__global__ void softmax_backward_columns_kernel(T* grad_x, const T* grad_y, const T* y, Lines<3> lines) {
  using C = compute_t<T>;
  BRIGADE_GRID_STRIDE_LOOP(line, lines.count, int64_t) {
    int64_t off[3];
    lines.starts.offsets(line, off);
    T* gx = grad_x + off[0];
    const T* gy = grad_y + off[1];
    const T* yl = y + off[2];
    const int64_t xs = lines.step[0], gs = lines.step[1], ys = lines.step[2];
    C total = 0;
    for (int64_t i = 0; i < lines.length; ++i)
      total += backward_term<kLog>(to_compute(gy[i * gs]), to_compute(yl[i * ys]));
    for (int64_t i = 0; i < lines.length; ++i)
      gx[i * xs] = from_compute<T>(backward_value<kLog>(to_compute(gy[i * gs]), to_compute(yl[i * ys]), total));
  }
}

// ---- host side ----

// Who owns a line: a warp or a block (the rows kernels) when the line of `operand` — the input the
// kernel reads twice — is contiguous, else a thread (the columns kernels).
enum class Owner { warp, block, thread };

template <int N>
Owner line_owner(const Lines<N>& lines, int operand) {
  const int64_t step = lines.step[operand];
  if (lines.length > 1 && step != 1 && step != -1) return Owner::thread;
  return lines.length > kWarpRowLimit ? Owner::block : Owner::warp;
}

template <bool kLog>
void forward(const char* op, const Tensor& y, const Tensor& x, int64_t dim) {
  if (y.numel() == 0) return;
  const Lines<2> lines = make_lines<2>(op, {&y, &x}, dim);
  const Device device = x.device();
  cudaStream_t stream = stream_for(x);
  visit_floating(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    T* yp = static_cast<T*>(y.raw_data());
    const T* xp = static_cast<const T*>(x.raw_data());
    switch (line_owner(lines, 1)) {
      case Owner::warp:
        softmax_rows_kernel<kLog, false><<<unsigned(ceil_div(lines.count, kRowsPerBlock)),
                                           dim3(kWarp, kRowsPerBlock), 0, stream>>>(yp, xp, lines);
        break;
      case Owner::block:
        softmax_rows_kernel<kLog, true><<<unsigned(lines.count), kThreads, 0, stream>>>(yp, xp, lines);
        break;
      case Owner::thread:
        softmax_columns_kernel<kLog><<<grid_for(lines.count, device), kThreads, 0, stream>>>(yp, xp, lines);
        break;
    }
    BRIGADE_CUDA_CHECK_LAUNCH();
  });
}

template <bool kLog>
void backward(const char* op, const Tensor& grad_x, const Tensor& grad_y, const Tensor& y, int64_t dim) {
  if (grad_x.numel() == 0) return;
  const Lines<3> lines = make_lines<3>(op, {&grad_x, &grad_y, &y}, dim);
  const Device device = y.device();
  cudaStream_t stream = stream_for(y);
  visit_floating(y.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    T* gx = static_cast<T*>(grad_x.raw_data());
    const T* gy = static_cast<const T*>(grad_y.raw_data());
    const T* yp = static_cast<const T*>(y.raw_data());
    switch (line_owner(lines, 2)) {
      case Owner::warp:
        softmax_backward_rows_kernel<kLog, false><<<unsigned(ceil_div(lines.count, kRowsPerBlock)),
                                                    dim3(kWarp, kRowsPerBlock), 0, stream>>>(gx, gy, yp, lines);
        break;
      case Owner::block:
        softmax_backward_rows_kernel<kLog, true><<<unsigned(lines.count), kThreads, 0, stream>>>(gx, gy, yp, lines);
        break;
      case Owner::thread:
        softmax_backward_columns_kernel<kLog><<<grid_for(lines.count, device), kThreads, 0, stream>>>(gx, gy, yp,
                                                                                                      lines);
        break;
    }
    BRIGADE_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace

void softmax(const Tensor& y, const Tensor& x, int64_t dim) { forward<false>("softmax", y, x, dim); }
void log_softmax(const Tensor& y, const Tensor& x, int64_t dim) { forward<true>("log_softmax", y, x, dim); }

void softmax_backward(const Tensor& grad_x, const Tensor& grad_y, const Tensor& y, int64_t dim) {
  backward<false>("softmax_backward", grad_x, grad_y, y, dim);
}

void log_softmax_backward(const Tensor& grad_x, const Tensor& grad_y, const Tensor& y, int64_t dim) {
  backward<true>("log_softmax_backward", grad_x, grad_y, y, dim);
}

}  // namespace brigade::cuda
