// CPU reference: sum/mean and max over dims.
//
// A reduction is two loop nests over x: the *kept* dims (one output each) and the *reduced* dims
// (folded into that output). Outputs are handed out in tiles of up to kTile neighbours along the
// innermost kept dim, and a tile walks the reduced nest once, updating all its outputs per step:
//
//   sum over dim 0 of [M, N]:  for j < M: for l < 64: acc[l] += x[j][t + l]   (rows read in order)
//   sum over dim 1 of [M, N]:  tiles of one output,  for j < N: acc += x[i][j]
//
// The tile width is chosen from the strides so the innermost loop walks memory in order either way.
// Each output still sees its inputs in row-major order of the reduced dims, accumulated in double, so
// neither the tile choice nor the thread count (threads split outputs, never one reduction) changes a
// result.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <type_traits>

#include "core/parallel.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/strided.h"

namespace brigade::cpu {
namespace {

constexpr int64_t kTile = 64;

struct ReductionNests {
  Shape kept, reduced;                    // sizes, outermost first; empty = a single iteration
  Strides kept_strides, reduced_strides;  // x's strides along them, in elements
};

// Splits x's dims into the two nests. Size-1 dims are dropped and neighbouring dims of the same kind
// merged when x lays them out back to back (fewer, longer loops; outputs stay in row-major order).
ReductionNests split_dims(const Tensor& x, const std::vector<bool>& reduced) {
  ReductionNests n;
  int last_kind = -1;  // kind of the previous dim kept: 0 kept, 1 reduced
  for (size_t d = 0; d < size_t(x.dim()); ++d) {
    const int64_t size = x.shape()[d], stride = x.strides()[d];
    if (size == 1) continue;
    const int kind = reduced[d] ? 1 : 0;
    Shape& sizes = kind ? n.reduced : n.kept;
    Strides& strides = kind ? n.reduced_strides : n.kept_strides;
    if (kind == last_kind && strides.back() == stride * size) {
      sizes.back() *= size;
      strides.back() = stride;
    } else {
      sizes.push_back(size);
      strides.push_back(stride);
    }
    last_kind = kind;
  }
  return n;
}

// Calls row(offset, length, stride) for each row of the reduced nest, in row-major order: the
// elements offset + j * stride for j < length (offsets relative to the tile's first input).
template <class RowFn>
void for_each_reduced_row(const ReductionNests& n, RowFn&& row) {
  if (n.reduced.empty()) return row(int64_t(0), int64_t(1), int64_t(0));
  if (shape_numel(n.reduced) == 0) return;  // an empty reduction: the outputs keep their initial values
  const size_t outer = n.reduced.size() - 1;
  const int64_t rows = shape_numel(n.reduced) / n.reduced.back();
  std::vector<int64_t> idx(outer, 0);
  int64_t offset = 0;
  for (int64_t r = 0; r < rows; ++r) {
    row(offset, n.reduced.back(), n.reduced_strides.back());
    for (size_t d = outer; d-- > 0;) {  // odometer step, keeping `offset` in sync
      offset += n.reduced_strides[d];
      if (++idx[d] < n.reduced[d]) break;
      offset -= idx[d] * n.reduced_strides[d];
      idx[d] = 0;
    }
  }
}

// Splits the outputs into tiles and calls tile(first_output, x_offset, width, kept_stride) for each,
// in parallel: outputs first_output .. first_output + width - 1 start at x_offset + l * kept_stride.
template <class TileFn>
void for_each_tile(const ReductionNests& n, TileFn&& tile) {
  const int64_t outputs = shape_numel(n.kept);
  const int64_t length = n.kept.empty() ? 1 : n.kept.back();
  const int64_t kept_stride = n.kept.empty() ? 0 : n.kept_strides.back();
  if (outputs == 0) return;
  // Tiles of several outputs pay off when neighbouring outputs are closer in memory than
  // neighbouring inputs of one output; otherwise each output reads its own run of memory.
  const bool wide = !n.kept.empty() &&
                    (n.reduced.empty() || std::abs(kept_stride) <= std::abs(n.reduced_strides.back()));
  const int64_t width = wide ? kTile : 1;
  const int64_t tiles_per_row = (length + width - 1) / width;
  const int64_t work_per_tile = width * std::max<int64_t>(1, shape_numel(n.reduced));
  const size_t outer_dims = n.kept.empty() ? 0 : n.kept.size() - 1;  // kept dims but the innermost

  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      const int64_t row = u / tiles_per_row, start = (u % tiles_per_row) * width;
      int64_t offset = start * kept_stride, rest = row;
      for (size_t d = outer_dims; d-- > 0;) {
        offset += (rest % n.kept[d]) * n.kept_strides[d];
        rest /= n.kept[d];
      }
      tile(row * length + start, offset, std::min(width, length - start), kept_stride);
    }
  };
  parallel_for(outputs / length * tiles_per_row, std::max<int64_t>(1, kElementsPerChunk / work_per_tile), run);
}

template <class T>
void sum_typed(const Tensor& out, const Tensor& x, const std::vector<bool>& reduced, double scale) {
  const ReductionNests n = split_dims(x, reduced);
  const T* in = x.data<T>();
  T* o = out.data<T>();
  for_each_tile(n, [&](int64_t first, int64_t offset, int64_t width, int64_t ks) {
    double acc[kTile] = {};
    for_each_reduced_row(n, [&](int64_t off, int64_t len, int64_t rs) {
      const T* p = in + offset + off;
      if (width == 1) {
        double a = acc[0];
        for (int64_t j = 0; j < len; ++j) a += double(p[j * rs]);
        acc[0] = a;
        return;
      }
      for (int64_t j = 0; j < len; ++j, p += rs)
        for (int64_t l = 0; l < width; ++l) acc[l] += double(p[l * ks]);
    });
    for (int64_t l = 0; l < width; ++l) o[first + l] = T(acc[l] * scale);
  });
}

// v beats the best so far: strictly greater (so the first maximum wins ties), or the first NaN.
template <class T>
bool beats(T v, T best) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(best)) return false;
    if (std::isnan(v)) return true;
  }
  return v > best;
}

template <class T>
void max_typed(const Tensor& values, const Tensor& indices, const Tensor& x, int64_t dim) {
  std::vector<bool> reduced(size_t(x.dim()), false);
  if (x.dim() > 0) reduced[size_t(dim)] = true;
  const ReductionNests n = split_dims(x, reduced);  // one reduced dim at most: its row is the dim
  const T* in = x.data<T>();
  T* out = values.data<T>();
  int64_t* arg = indices.data<int64_t>();
  for_each_tile(n, [&](int64_t first, int64_t offset, int64_t width, int64_t ks) {
    T best[kTile];
    int64_t where[kTile];
    for_each_reduced_row(n, [&](int64_t off, int64_t len, int64_t rs) {
      const T* p = in + offset + off;
      for (int64_t l = 0; l < width; ++l) {
        best[l] = p[l * ks];
        where[l] = 0;
      }
      for (int64_t j = 1; j < len; ++j)
        for (int64_t l = 0; l < width; ++l) {
          const T v = p[j * rs + l * ks];
          if (beats(v, best[l])) {
            best[l] = v;
            where[l] = j;
          }
        }
    });
    for (int64_t l = 0; l < width; ++l) {
      out[first + l] = best[l];
      arg[first + l] = where[l];
    }
  });
}

}  // namespace

void sum(const Tensor& out, const Tensor& x, const std::vector<bool>& reduced, double scale) {
  visit_float(x.dtype(), "sum", [&](auto tag) { sum_typed<decltype(tag)>(out, x, reduced, scale); });
}

void max(const Tensor& values, const Tensor& indices, const Tensor& x, int64_t dim) {
  switch (x.dtype()) {
    case DType::f32: return max_typed<float>(values, indices, x, dim);
    case DType::f64: return max_typed<double>(values, indices, x, dim);
    case DType::i32: return max_typed<int32_t>(values, indices, x, dim);
    case DType::i64: return max_typed<int64_t>(values, indices, x, dim);
    default: return;  // bf16/f16 are widened by the op layer
  }
}

void max_backward(const Tensor& grad_x, const Tensor& grad, const Tensor& indices, int64_t dim) {
  // A view of grad_x with grad's shape (dim of size 1) at the same strides: each gradient element
  // lands at its position there, moved `index` steps along dim.
  const Tensor target = make_view(grad_x, grad.shape(), grad_x.strides(), grad_x.offset());
  const int64_t step = grad_x.strides()[size_t(dim)];
  visit_dtype(grad_x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    for_each_row(grad.shape(), {&target, &grad, &indices},
                 [step](const std::vector<char*>& p, const std::vector<int64_t>& st, int64_t n) {
                   T* gx = reinterpret_cast<T*>(p[0]);
                   const T* g = reinterpret_cast<const T*>(p[1]);
                   const int64_t* idx = reinterpret_cast<const int64_t*>(p[2]);
                   for (int64_t i = 0; i < n; ++i) gx[i * st[0] + idx[i * st[2]] * step] = g[i * st[1]];
                 });
  });
}

}  // namespace brigade::cpu
