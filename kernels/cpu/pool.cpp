// CPU reference: 2-D max and average pooling, forward and backward.
//
// Each output pixel (oh, ow) summarises the window of input rows [oh * stride - padding, + kernel)
// and columns [ow * stride - padding, + kernel), clipped to the plane. Windows may overlap (stride <
// kernel), so the backward kernels ADD into grad_x; they run one whole (n, c) plane per thread, in
// output order, so the sums are the same for any thread count.
#include <algorithm>
#include <cmath>

#include "core/parallel.h"
#include "kernels/cpu/kernels.h"

namespace brigade::cpu {
namespace {

// The part of a window that lies inside the plane: positions [begin, end) along one dim.
struct Window {
  int64_t begin, end;
};
Window window(int64_t out_pos, const ops::Pool2dParams& p, int64_t in_size) {
  int64_t start = out_pos * p.stride - p.padding;
  return {std::max<int64_t>(start, 0), std::min(start + p.kernel, in_size)};
}

// Sizes seen as planes: x is [planes, H, W], y is [planes, OH, OW].
struct Planes {
  int64_t count, H, W, OH, OW;
};
Planes planes(const Shape& x, const Shape& y) { return {x[0] * x[1], x[2], x[3], y[2], y[3]}; }

// Planes per parallel chunk: at least ~64k element visits each, so tiny inputs stay on one thread.
int64_t planes_per_chunk(int64_t work_per_plane) {
  constexpr int64_t kMinWorkPerChunk = int64_t(1) << 16;
  return std::max<int64_t>(1, kMinWorkPerChunk / std::max<int64_t>(1, work_per_plane));
}

// Calls plane_fn(plane) once for every plane, whole planes per thread.
template <class PlaneFn>
void for_each_plane(const Planes& g, int64_t work_per_plane, PlaneFn&& plane_fn) {
  parallel_for(g.count, planes_per_chunk(work_per_plane), [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) plane_fn(plane);
  });
}

// Work per plane of a kernel that walks every window: each output pixel reads up to kernel^2 inputs.
int64_t window_work(const Planes& g, const ops::Pool2dParams& p) { return g.OH * g.OW * p.kernel * p.kernel; }

// Calls visit(o, rows, cols) for every output pixel of `plane` in output order: o is the pixel's
// index into y, rows and cols its window clipped to the input plane.
template <class VisitFn>
void for_each_window(const Planes& g, const ops::Pool2dParams& p, int64_t plane, VisitFn&& visit) {
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    Window rows = window(oh, p, g.H);
    for (int64_t ow = 0; ow < g.OW; ++ow) visit((plane * g.OH + oh) * g.OW + ow, rows, window(ow, p, g.W));
  }
}

template <class T>
void max_forward(const Tensor& y, const Tensor& indices, const Tensor& x, const ops::Pool2dParams& p) {
  Planes g = planes(x.shape(), y.shape());
  const T* xd = x.data<T>();
  T* yd = y.data<T>();
  int64_t* id = indices.data<int64_t>();
  for_each_plane(g, window_work(g, p), [&](int64_t plane) {
    const T* in = xd + plane * g.H * g.W;
    for_each_window(g, p, plane, [&](int64_t o, Window rows, Window cols) {
      // The op layer guarantees every window holds at least one real element (padding <=
      // kernel / 2), so `best` always ends up naming one.
      int64_t best = -1;
      for (int64_t ih = rows.begin; ih < rows.end; ++ih)
        for (int64_t iw = cols.begin; iw < cols.end; ++iw) {
          int64_t i = ih * g.W + iw;
          // Strictly greater keeps the first maximum on ties; a NaN beats any number (and the
          // first NaN stays), so a NaN in the window shows up in the output.
          bool better = best < 0 || in[i] > in[best] || (std::isnan(in[i]) && !std::isnan(in[best]));
          if (better) best = i;
        }
      yd[o] = in[best];
      id[o] = best;
    });
  });
}

template <class T>
void max_backward(const Tensor& grad_x, const Tensor& grad_y, const Tensor& indices) {
  Planes g = planes(grad_x.shape(), grad_y.shape());
  const T* gyd = grad_y.data<T>();
  const int64_t* id = indices.data<int64_t>();
  T* gxd = grad_x.data<T>();
  int64_t out_plane = g.OH * g.OW;
  for_each_plane(g, out_plane + g.H * g.W, [&](int64_t plane) {
    T* gx = gxd + plane * g.H * g.W;
    std::fill(gx, gx + g.H * g.W, T(0));
    for (int64_t o = plane * out_plane; o < (plane + 1) * out_plane; ++o) gx[id[o]] += gyd[o];
  });
}

// count_include_pad: the divisor is the full window, padding included (the op layer rules out
// windows that would hang past the padding, so every window has kernel^2 positions).
template <class T>
T inverse_area(const ops::Pool2dParams& p) { return T(1) / T(p.kernel * p.kernel); }

template <class T>
void avg_forward(const Tensor& y, const Tensor& x, const ops::Pool2dParams& p) {
  Planes g = planes(x.shape(), y.shape());
  const T* xd = x.data<T>();
  T* yd = y.data<T>();
  const T inv_area = inverse_area<T>(p);
  for_each_plane(g, window_work(g, p), [&](int64_t plane) {
    const T* in = xd + plane * g.H * g.W;
    for_each_window(g, p, plane, [&](int64_t o, Window rows, Window cols) {
      T sum = 0;
      for (int64_t ih = rows.begin; ih < rows.end; ++ih)
        for (int64_t iw = cols.begin; iw < cols.end; ++iw) sum += in[ih * g.W + iw];
      yd[o] = sum * inv_area;
    });
  });
}

template <class T>
void avg_backward(const Tensor& grad_x, const Tensor& grad_y, const ops::Pool2dParams& p) {
  Planes g = planes(grad_x.shape(), grad_y.shape());
  const T* gyd = grad_y.data<T>();
  T* gxd = grad_x.data<T>();
  const T inv_area = inverse_area<T>(p);
  for_each_plane(g, window_work(g, p), [&](int64_t plane) {
    T* gx = gxd + plane * g.H * g.W;
    std::fill(gx, gx + g.H * g.W, T(0));
    for_each_window(g, p, plane, [&](int64_t o, Window rows, Window cols) {
      T share = gyd[o] * inv_area;  // every position got 1/area of y
      for (int64_t ih = rows.begin; ih < rows.end; ++ih)
        for (int64_t iw = cols.begin; iw < cols.end; ++iw) gx[ih * g.W + iw] += share;
    });
  });
}

}  // namespace

void max_pool2d(const Tensor& y, const Tensor& indices, const Tensor& x, ops::Pool2dParams p) {
  visit_float(y.dtype(), "max_pool2d", [&](auto tag) { max_forward<decltype(tag)>(y, indices, x, p); });
}

void max_pool2d_backward(const Tensor& grad_x, const Tensor& grad_y, const Tensor& indices, ops::Pool2dParams) {
  visit_float(grad_x.dtype(), "max_pool2d_backward",
              [&](auto tag) { max_backward<decltype(tag)>(grad_x, grad_y, indices); });
}

void avg_pool2d(const Tensor& y, const Tensor& x, ops::Pool2dParams p) {
  visit_float(y.dtype(), "avg_pool2d", [&](auto tag) { avg_forward<decltype(tag)>(y, x, p); });
}

void avg_pool2d_backward(const Tensor& grad_x, const Tensor& grad_y, ops::Pool2dParams p) {
  visit_float(grad_x.dtype(), "avg_pool2d_backward",
              [&](auto tag) { avg_backward<decltype(tag)>(grad_x, grad_y, p); });
}

}  // namespace brigade::cpu
