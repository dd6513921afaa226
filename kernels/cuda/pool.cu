// CUDA pooling: max (with argmax indices) and average, forward and backward, NCHW.
//
// Forward kernels run one thread per output element over its window, clipped to the plane. The
// backward kernels run one thread per INPUT element and gather from the windows that cover it
// (`covering`), instead of scattering from each output into its window as the CPU does: windows
// overlap when stride < kernel, and a scatter would need atomic adds, whose order — and so whose
// rounding — changes from run to run. The gather visits the windows in output order, the order in
// which the CPU's scatter adds into each element, so both produce the same sums bit for bit.
#include <climits>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kernels.h"

namespace brigade::cuda {
namespace {

struct PoolGeometry {
  int64_t planes;  // N * C
  int H, W, OH, OW;
  int kernel, stride, padding;
};

// Input positions [begin, end) along one dim.
struct Span {
  int begin, end;
};

// The part of output position o's window that lies inside the input: [o*stride - padding, + kernel).
__host__ __device__ __forceinline__ Span window(int o, int kernel, int stride, int padding, int size) {
  // (Spelled out: inside brigade::cuda, `max` names the reduction kernel, which hides CUDA's max.)
  const int start = o * stride - padding, end = start + kernel;
  return {start > 0 ? start : 0, end < size ? end : size};
}

// The output positions whose windows contain input position i: o*stride - padding <= i <
// o*stride - padding + kernel, i.e. (i + padding - kernel) / stride < o <= (i + padding) / stride.
__host__ __device__ __forceinline__ Span covering(int i, int kernel, int stride, int padding, int out_size) {
  const int last = (i + padding) / stride;  // i + padding >= 0
  const int after = i + padding - kernel + 1;  // o * stride >= after
  const int first = after <= 0 ? 0 : (after + stride - 1) / stride;
  return {first, last + 1 < out_size ? last + 1 : out_size};
}

// a * b rounded on its own: nvcc would otherwise fuse `acc + a * b` into one FMA, which rounds
// differently from the CPU's separate multiply and add.
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }

template <class T>
__global__ void max_pool_forward(T* y, int64_t* indices, const T* x, PoolGeometry g) {
  const int64_t total = g.planes * g.OH * g.OW;
  BRIGADE_GRID_STRIDE_LOOP(o, total, int64_t) {
    const int ow = int(o % g.OW), oh = int(o / g.OW % g.OH);
    const T* in = x + o / (int64_t(g.OH) * g.OW) * (int64_t(g.H) * g.W);
    const Span rows = window(oh, g.kernel, g.stride, g.padding, g.H);
    const Span cols = window(ow, g.kernel, g.stride, g.padding, g.W);
    // The op layer guarantees every window holds a real element, so `best` always names one.
    int best = -1;
    compute_t<T> best_value = 0;
    for (int ih = rows.begin; ih < rows.end; ++ih)
      for (int iw = cols.begin; iw < cols.end; ++iw) {
        const int i = ih * g.W + iw;
        const compute_t<T> v = to_compute(in[i]);
        // As on the CPU: strictly greater keeps the first maximum; a NaN beats any number and the
        // first NaN stays, so NaNs propagate.
        if (best < 0 || v > best_value || (isnan(v) && !isnan(best_value))) best = i, best_value = v;
      }
    y[o] = in[best];  // the element itself: no rounding, NaN bits kept
    indices[o] = best;
  }
}

template <class T>
__global__ void max_pool_backward(T* grad_x, const T* grad_y, const int64_t* indices, PoolGeometry g) {
  const int64_t total = g.planes * g.H * g.W;
  BRIGADE_GRID_STRIDE_LOOP(i, total, int64_t) {
    const int iw = int(i % g.W), ih = int(i / g.W % g.H);
    const int64_t first_output = i / (int64_t(g.H) * g.W) * (int64_t(g.OH) * g.OW);
    const Span rows = covering(ih, g.kernel, g.stride, g.padding, g.OH);
    const Span cols = covering(iw, g.kernel, g.stride, g.padding, g.OW);
    const int64_t me = ih * g.W + iw;
    compute_t<T> acc = 0;
    for (int oh = rows.begin; oh < rows.end; ++oh)
      for (int ow = cols.begin; ow < cols.end; ++ow) {
        const int64_t o = first_output + oh * g.OW + ow;
        if (indices[o] == me) acc += to_compute(grad_y[o]);
      }
    grad_x[i] = from_compute<T>(acc);
  }
}

template <class T>
__global__ void avg_pool_forward(T* y, const T* x, PoolGeometry g) {
  using C = compute_t<T>;
  // count_include_pad: every window counts kernel^2 positions (the op layer keeps windows within
  // the padding). The same expression as the CPU's, so the same rounding.
  const C inv_area = C(1) / C(g.kernel * g.kernel);
  const int64_t total = g.planes * g.OH * g.OW;
  BRIGADE_GRID_STRIDE_LOOP(o, total, int64_t) {
    const int ow = int(o % g.OW), oh = int(o / g.OW % g.OH);
    const T* in = x + o / (int64_t(g.OH) * g.OW) * (int64_t(g.H) * g.W);
    const Span rows = window(oh, g.kernel, g.stride, g.padding, g.H);
    const Span cols = window(ow, g.kernel, g.stride, g.padding, g.W);
    C sum = 0;
    for (int ih = rows.begin; ih < rows.end; ++ih)
      for (int iw = cols.begin; iw < cols.end; ++iw) sum += to_compute(in[ih * g.W + iw]);
    y[o] = from_compute<T>(sum * inv_area);
  }
}

template <class T>
__global__ void avg_pool_backward(T* grad_x, const T* grad_y, PoolGeometry g) {
  using C = compute_t<T>;
  const C inv_area = C(1) / C(g.kernel * g.kernel);
  const int64_t total = g.planes * g.H * g.W;
  BRIGADE_GRID_STRIDE_LOOP(i, total, int64_t) {
    const int iw = int(i % g.W), ih = int(i / g.W % g.H);
    const int64_t first_output = i / (int64_t(g.H) * g.W) * (int64_t(g.OH) * g.OW);
    const Span rows = covering(ih, g.kernel, g.stride, g.padding, g.OH);
    const Span cols = covering(iw, g.kernel, g.stride, g.padding, g.OW);
    C acc = 0;
    for (int oh = rows.begin; oh < rows.end; ++oh)
      for (int ow = cols.begin; ow < cols.end; ++ow)
        acc += mul_rn(to_compute(grad_y[first_output + oh * g.OW + ow]), inv_area);  // each window's share
    grad_x[i] = from_compute<T>(acc);
  }
}

// x and y are [N, C, H, W] and [N, C, OH, OW].
PoolGeometry geometry(const char* op, const Shape& x, const Shape& y, ops::Pool2dParams p) {
  BRIGADE_CHECK(x[2] * x[3] <= INT_MAX && y[2] * y[3] <= INT_MAX, op, ": planes of input shape ", shape_str(x),
                " are too large for the CUDA kernels (more than 2^31 elements)");
  return {x[0] * x[1], int(x[2]), int(x[3]), int(y[2]), int(y[3]), int(p.kernel), int(p.stride), int(p.padding)};
}

}  // namespace

void max_pool2d(const Tensor& y, const Tensor& indices, const Tensor& x, ops::Pool2dParams p) {
  const PoolGeometry g = geometry("max_pool2d", x.shape(), y.shape(), p);
  if (y.numel() == 0) return;
  cudaStream_t stream = stream_for(x);
  visit_floating(x.dtype(), "max_pool2d", [&](auto tag) {
    using T = decltype(tag);
    max_pool_forward<T><<<grid_for(y.numel(), x.device()), kThreads, 0, stream>>>(
        y.data<T>(), indices.data<int64_t>(), x.data<T>(), g);
    BRIGADE_CUDA_CHECK_LAUNCH();
  });
}

void max_pool2d_backward(const Tensor& grad_x, const Tensor& grad_y, const Tensor& indices, ops::Pool2dParams p) {
  const PoolGeometry g = geometry("max_pool2d_backward", grad_x.shape(), grad_y.shape(), p);
  if (grad_x.numel() == 0) return;
  cudaStream_t stream = stream_for(grad_x);
  visit_floating(grad_x.dtype(), "max_pool2d_backward", [&](auto tag) {
    using T = decltype(tag);
    max_pool_backward<T><<<grid_for(grad_x.numel(), grad_x.device()), kThreads, 0, stream>>>(
        grad_x.data<T>(), grad_y.data<T>(), indices.data<int64_t>(), g);
    BRIGADE_CUDA_CHECK_LAUNCH();
  });
}

void avg_pool2d(const Tensor& y, const Tensor& x, ops::Pool2dParams p) {
  const PoolGeometry g = geometry("avg_pool2d", x.shape(), y.shape(), p);
  if (y.numel() == 0) return;
  cudaStream_t stream = stream_for(x);
  visit_floating(x.dtype(), "avg_pool2d", [&](auto tag) {
    using T = decltype(tag);
    avg_pool_forward<T><<<grid_for(y.numel(), x.device()), kThreads, 0, stream>>>(y.data<T>(), x.data<T>(), g);
    BRIGADE_CUDA_CHECK_LAUNCH();
  });
}

void avg_pool2d_backward(const Tensor& grad_x, const Tensor& grad_y, ops::Pool2dParams p) {
  const PoolGeometry g = geometry("avg_pool2d_backward", grad_x.shape(), grad_y.shape(), p);
  if (grad_x.numel() == 0) return;
  cudaStream_t stream = stream_for(grad_x);
  visit_floating(grad_x.dtype(), "avg_pool2d_backward", [&](auto tag) {
    using T = decltype(tag);
    avg_pool_backward<T><<<grid_for(grad_x.numel(), grad_x.device()), kThreads, 0, stream>>>(
        grad_x.data<T>(), grad_y.data<T>(), g);
    BRIGADE_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace brigade::cuda
