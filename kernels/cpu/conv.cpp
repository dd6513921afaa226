// CPU reference: 2-D convolution (NCHW) forward and backward, as direct loops over kernel taps.
//
// A convolution is a sum over kernel taps. For the tap (c, kh, kw), every output pixel (oh, ow)
// reads the input pixel
//     (ih, iw) = (oh * stride - padding + kh,  ow * stride - padding + kw)
// and multiplies it by the single weight w[o, c, kh, kw]. So rather than walking each output
// pixel's window, the kernels walk the taps and, for each tap, sweep whole output rows:
//     y_row[ow] += w * x_row[ow * stride + shift]
// Padding is handled by clipping that row range once per tap (taps never read outside the input),
// leaving a branch-free inner loop that the compiler vectorises at stride 1. This computes the same
// sums as im2col + GEMM without materialising the column matrix.
//
// Threads split the work by OUTPUT plane: (n, o) for y, (n, c) for grad_x, (o, c) for grad_weight.
// Each sum is therefore accumulated by one thread in a fixed order, and results do not depend on the
// thread count.
#include <algorithm>

#include "core/parallel.h"
#include "kernels/cpu/kernels.h"

namespace brigade::cpu {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }  // a >= 0, b > 0

// Sizes of the three operands, read once from the shapes.
struct Geometry {
  int64_t N, C, H, W;  // input
  int64_t O, KH, KW;   // weight (its C equals the input's)
  int64_t OH, OW;      // output
  int64_t stride, padding;

  int64_t in_plane() const { return H * W; }
  int64_t out_plane() const { return OH * OW; }
  int64_t taps() const { return KH * KW; }
};

Geometry geometry(const Shape& x, const Shape& weight, const Shape& y, ops::Conv2dParams p) {
  return {x[0], x[1], x[2], x[3], weight[0], weight[2], weight[3], y[2], y[3], p.stride, p.padding};
}

// The output positions i in [0, out_size) whose input position i * stride + shift lies inside
// [0, in_size). The others would read padding (zeros) and contribute nothing.
struct Span {
  int64_t begin, end;
};
Span valid_outputs(int64_t shift, int64_t stride, int64_t in_size, int64_t out_size) {
  int64_t begin = shift >= 0 ? 0 : ceil_div(-shift, stride);      // i * stride + shift >= 0
  int64_t limit = in_size - shift;                                  // i * stride < limit
  int64_t end = limit <= 0 ? 0 : std::min(out_size, ceil_div(limit, stride));
  return {begin, std::max(begin, end)};
}

// Calls row(y_index, x_index, n) once for every output row that tap (kh, kw) touches: output plane
// element y_index + j pairs with input plane element x_index + j * stride, for j in [0, n).
template <class RowFn>
void for_each_tap_row(const Geometry& g, int64_t kh, int64_t kw, RowFn&& row) {
  Span rows = valid_outputs(kh - g.padding, g.stride, g.H, g.OH);
  Span cols = valid_outputs(kw - g.padding, g.stride, g.W, g.OW);
  int64_t n = cols.end - cols.begin;
  if (n == 0) return;
  for (int64_t oh = rows.begin; oh < rows.end; ++oh) {
    int64_t ih = oh * g.stride + kh - g.padding;
    int64_t iw = cols.begin * g.stride + kw - g.padding;
    row(oh * g.OW + cols.begin, ih * g.W + iw, n);
  }
}

// for_each_tap_row over every tap of the kernel: row(tap, y_index, x_index, n), tap = kh * KW + kw
// (the tap's index in a [KH, KW] weight plane).
template <class RowFn>
void for_each_tap(const Geometry& g, RowFn&& row) {
  for (int64_t kh = 0; kh < g.KH; ++kh)
    for (int64_t kw = 0; kw < g.KW; ++kw) {
      const int64_t tap = kh * g.KW + kw;
      for_each_tap_row(g, kh, kw, [&](int64_t yi, int64_t xi, int64_t n) { row(tap, yi, xi, n); });
    }
}

// The three row operations. Each has a unit-stride path because a loop with a runtime stride does
// not vectorise, and stride 1 is by far the common case.
template <class T>
void gather_axpy(T* y, const T* x, int64_t x_step, int64_t n, T w) {  // y[j] += w * x[j * x_step]
  if (x_step == 1) {
    for (int64_t j = 0; j < n; ++j) y[j] += w * x[j];
  } else {
    for (int64_t j = 0; j < n; ++j) y[j] += w * x[j * x_step];
  }
}

template <class T>
void scatter_axpy(T* x, int64_t x_step, const T* y, int64_t n, T w) {  // x[j * x_step] += w * y[j]
  if (x_step == 1) {
    for (int64_t j = 0; j < n; ++j) x[j] += w * y[j];
  } else {
    for (int64_t j = 0; j < n; ++j) x[j * x_step] += w * y[j];
  }
}

template <class T>
T dot(const T* y, const T* x, int64_t x_step, int64_t n) {  // sum_j y[j] * x[j * x_step]
  T acc = 0;
  if (x_step != 1) {
    for (int64_t j = 0; j < n; ++j) acc += y[j] * x[j * x_step];
    return acc;
  }
  // Eight partial sums: the compiler may not reorder one floating-point sum, but eight independent
  // ones fill a SIMD register. The grouping is fixed, so the result is still deterministic.
  constexpr int64_t kLanes = 8;
  T lanes[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) lanes[l] += y[j + l] * x[j + l];
  for (int64_t l = 0; l < kLanes; ++l) acc += lanes[l];
  for (; j < n; ++j) acc += y[j] * x[j];
  return acc;
}

// Output planes per parallel chunk: enough that a chunk does at least ~64k multiply-adds, so small
// convolutions are not drowned in thread hand-off costs.
int64_t planes_per_chunk(int64_t work_per_plane) {
  constexpr int64_t kMinWorkPerChunk = int64_t(1) << 16;
  return std::max<int64_t>(1, kMinWorkPerChunk / std::max<int64_t>(1, work_per_plane));
}

// Splits the outer * inner output planes among threads; plane(index, a, b) with index = a * inner + b
// is called once per plane, work_per_plane sizing the chunks.
template <class PlaneFn>
void for_each_plane(int64_t outer, int64_t inner, int64_t work_per_plane, PlaneFn&& plane) {
  parallel_for(outer * inner, planes_per_chunk(work_per_plane), [&](int64_t begin, int64_t end) {
    for (int64_t index = begin; index < end; ++index) plane(index, index / inner, index % inner);
  });
}

template <class T>
void forward(const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor& bias, const Geometry& g) {
  const T* xd = x.data<T>();
  const T* wd = weight.data<T>();
  const T* bd = bias.defined() ? bias.data<T>() : nullptr;
  T* yd = y.data<T>();
  for_each_plane(g.N, g.O, g.C * g.taps() * g.out_plane(), [&](int64_t plane, int64_t n, int64_t o) {
    T* out = yd + plane * g.out_plane();
    std::fill(out, out + g.out_plane(), bd ? bd[o] : T(0));
    for (int64_t c = 0; c < g.C; ++c) {
      const T* in = xd + (n * g.C + c) * g.in_plane();
      const T* w = wd + (o * g.C + c) * g.taps();
      for_each_tap(g, [&](int64_t tap, int64_t yi, int64_t xi, int64_t len) {
        gather_axpy(out + yi, in + xi, g.stride, len, w[tap]);
      });
    }
  });
}

// grad_x[n, c] = sum over o and taps of w[o, c, tap] * grad_y[n, o] placed back where the tap read
// from: the forward's gather, run as a scatter.
template <class T>
void backward_input(const Tensor& grad_x, const Tensor& grad_y, const Tensor& weight, const Geometry& g) {
  const T* gyd = grad_y.data<T>();
  const T* wd = weight.data<T>();
  T* gxd = grad_x.data<T>();
  for_each_plane(g.N, g.C, g.O * g.taps() * g.out_plane(), [&](int64_t plane, int64_t n, int64_t c) {
    T* gx = gxd + plane * g.in_plane();
    std::fill(gx, gx + g.in_plane(), T(0));
    for (int64_t o = 0; o < g.O; ++o) {
      const T* gy = gyd + (n * g.O + o) * g.out_plane();
      const T* w = wd + (o * g.C + c) * g.taps();
      for_each_tap(g, [&](int64_t tap, int64_t yi, int64_t xi, int64_t len) {
        scatter_axpy(gx + xi, g.stride, gy + yi, len, w[tap]);
      });
    }
  });
}

// grad_w[o, c, tap] = sum over n and output pixels of grad_y[n, o] * (the x pixel the tap read).
template <class T>
void backward_weight(const Tensor& grad_w, const Tensor& grad_y, const Tensor& x, const Geometry& g) {
  const T* gyd = grad_y.data<T>();
  const T* xd = x.data<T>();
  T* gwd = grad_w.data<T>();
  for_each_plane(g.O, g.C, g.N * g.taps() * g.out_plane(), [&](int64_t pair, int64_t o, int64_t c) {
    T* gw = gwd + pair * g.taps();
    std::fill(gw, gw + g.taps(), T(0));
    for (int64_t n = 0; n < g.N; ++n) {
      const T* gy = gyd + (n * g.O + o) * g.out_plane();
      const T* in = xd + (n * g.C + c) * g.in_plane();
      for_each_tap(g, [&](int64_t tap, int64_t yi, int64_t xi, int64_t len) {
        gw[tap] += dot(gy + yi, in + xi, g.stride, len);
      });
    }
  });
}

template <class T>
void backward_bias(const Tensor& grad_b, const Tensor& grad_y) {
  const Shape& s = grad_y.shape();
  int64_t N = s[0], O = s[1], plane = s[2] * s[3];
  const T* gyd = grad_y.data<T>();
  T* gbd = grad_b.data<T>();
  parallel_for(O, planes_per_chunk(N * plane), [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      T acc = 0;
      for (int64_t n = 0; n < N; ++n) {
        const T* gy = gyd + (n * O + o) * plane;
        for (int64_t i = 0; i < plane; ++i) acc += gy[i];
      }
      gbd[o] = acc;
    }
  });
}

}  // namespace

void conv2d(const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor& bias, ops::Conv2dParams p) {
  Geometry g = geometry(x.shape(), weight.shape(), y.shape(), p);
  visit_float(y.dtype(), "conv2d", [&](auto tag) { forward<decltype(tag)>(y, x, weight, bias, g); });
}

void conv2d_backward_input(const Tensor& grad_x, const Tensor& grad_y, const Tensor& weight, ops::Conv2dParams p) {
  Geometry g = geometry(grad_x.shape(), weight.shape(), grad_y.shape(), p);
  visit_float(grad_x.dtype(), "conv2d_backward_input",
              [&](auto tag) { backward_input<decltype(tag)>(grad_x, grad_y, weight, g); });
}

void conv2d_backward_weight(const Tensor& grad_weight, const Tensor& grad_y, const Tensor& x, ops::Conv2dParams p) {
  Geometry g = geometry(x.shape(), grad_weight.shape(), grad_y.shape(), p);
  visit_float(grad_weight.dtype(), "conv2d_backward_weight",
              [&](auto tag) { backward_weight<decltype(tag)>(grad_weight, grad_y, x, g); });
}

void conv2d_backward_bias(const Tensor& grad_bias, const Tensor& grad_y) {
  visit_float(grad_bias.dtype(), "conv2d_backward_bias",
              [&](auto tag) { backward_bias<decltype(tag)>(grad_bias, grad_y); });
}

}  // namespace brigade::cpu
