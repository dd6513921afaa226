// CPU kernels: fused attention (the contract: kernels/twins/attention.inc).
//
// The work is cut into blocks of kBlock queries x kBlock keys. For each block the scores
// S = q k^T and the products with v are GEMMs (kernels/cpu/matmul.h: packed, AVX2 where the CPU has
// it); between them a pass over the kBlock x kBlock scores does the softmax, the causal mask and
// dropout. Only one block of scores per thread exists at a time, so memory stays O(T d).
//
// Forward (one (batch, head, query block) per task): the online softmax. Each query row keeps its
// running maximum m and sum l of exp(s - m); a new key block that raises the maximum rescales the
// output accumulated so far by exp(m_old - m_new). At the end y = acc / l and lse = m + log l.
//
// Backward (one (batch, head) per task, so every gradient row is summed by one thread in a fixed
// order: deterministic, no atomics): for each query block and each key block it sees, the weights are
// recomputed from the saved lse (P = exp(s - lse), no second softmax), and
//   grad_v += (P o Z)^T grad_y,   dS = P o (Z o grad_y v^T - D),   grad_q += scale dS k,
//   grad_k += scale dS^T q,       with D_i = grad_y_i . y_i.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/parallel.h"
#include "core/rng.h"
#include "kernels/cpu/kernels.h"

namespace brigade::cpu {
namespace {

constexpr int64_t kBlock = 64;

// One (batch, head) slice of a [B, H, T, D] tensor as a T x D matrix (stride(3) == 1).
template <class T>
MatrixView<T> head_matrix(const Tensor& t, int64_t b, int64_t h) {
  T* base = t.data<T>() + b * t.stride(0) + h * t.stride(1);
  return {base, t.size(2), t.size(3), t.stride(2), 1};
}

template <class T>
MatrixView<T> rows_of(const MatrixView<T>& m, int64_t begin, int64_t end) {
  return {m.data + begin * m.row_stride, end - begin, m.cols, m.row_stride, m.col_stride};
}

template <class T>
MatrixView<const T> as_const(const MatrixView<T>& m) {
  return {m.data, m.rows, m.cols, m.row_stride, m.col_stride};
}

// Which keys and how dropout treats them, for one (batch, head).
struct Geometry {
  int64_t Tq, Tk, past;  // query i sits at position past + i
  bool causal;
  double dropout;
  uint64_t seed, mask_base;  // weight (i, j)'s Philox counter: mask_base + i * Tk + j

  // Keys [0, end) hold every key some query in [i0, i1) sees.
  int64_t key_end(int64_t i1) const { return causal ? std::min(Tk, past + i1) : Tk; }
  bool visible(int64_t i, int64_t j) const { return !causal || j <= past + i; }
  // Z: 0 for a dropped weight, 1 / (1 - p) for a kept one (1 without dropout).
  template <class T>
  T keep(int64_t i, int64_t j) const {
    if (dropout == 0) return T(1);
    return philox_uniform(seed, mask_base + uint64_t(i * Tk + j)) < dropout ? T(0) : T(1.0 / (1.0 - dropout));
  }
};

Geometry geometry_of(const Tensor& q, const Tensor& k, const ops::AttentionParams& p, int64_t b, int64_t h) {
  const int64_t H = q.size(1), Tq = q.size(2), Tk = k.size(2);
  return {Tq, Tk, Tk - Tq, p.causal, p.dropout, p.seed, p.offset + uint64_t(((b * H + h) * Tq) * Tk)};
}

// A per-thread scratch matrix of rows x cols, contiguous.
template <class T>
MatrixView<T> scratch(std::vector<T>& buffer, int64_t rows, int64_t cols) {
  buffer.resize(size_t(rows * cols));
  return {buffer.data(), rows, cols, cols, 1};
}

template <class T>
void forward_block(const Tensor& y, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                   const ops::AttentionParams& p, int64_t b, int64_t h, int64_t i0, int64_t i1) {
  const Geometry g = geometry_of(q, k, p, b, h);
  const int64_t D = q.size(3), rows = i1 - i0;
  const MatrixView<const T> qm = as_const(rows_of(head_matrix<T>(q, b, h), i0, i1));
  const MatrixView<T> km = head_matrix<T>(k, b, h), vm = head_matrix<T>(v, b, h);
  thread_local std::vector<T> s_buf, acc_buf, m_buf, l_buf;
  const MatrixView<T> acc = scratch(acc_buf, rows, D);
  std::fill(acc_buf.begin(), acc_buf.end(), T(0));
  m_buf.assign(size_t(rows), -std::numeric_limits<T>::infinity());
  l_buf.assign(size_t(rows), T(0));
  const T scale = T(p.scale);
  const int64_t end = g.key_end(i1);
  for (int64_t j0 = 0; j0 < end; j0 += kBlock) {
    const int64_t j1 = std::min(end, j0 + kBlock), cols = j1 - j0;
    const MatrixView<T> s = scratch(s_buf, rows, cols);
    gemm(s, qm, as_const(rows_of(km, j0, j1).transposed()));
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = i0 + r;
      T* row = &s(r, 0);
      // The first key block always holds key 0, which every query sees, so m is finite from then on.
      T m = m_buf[size_t(r)];
      for (int64_t c = 0; c < cols; ++c) {
        row[c] = g.visible(i, j0 + c) ? row[c] * scale : -std::numeric_limits<T>::infinity();
        m = std::max(m, row[c]);
      }
      const T rescale = std::exp(m_buf[size_t(r)] - m);  // exp(-inf) = 0 on the first block
      T sum = 0;
      for (int64_t c = 0; c < cols; ++c) {
        const T e = std::exp(row[c] - m);
        sum += e;
        row[c] = e * g.keep<T>(i, j0 + c);
      }
      l_buf[size_t(r)] = l_buf[size_t(r)] * rescale + sum;
      m_buf[size_t(r)] = m;
      if (rescale != T(1))
        for (int64_t d = 0; d < D; ++d) acc(r, d) *= rescale;
    }
    gemm(acc, as_const(s), as_const(rows_of(vm, j0, j1)), /*accumulate=*/true);
  }
  const MatrixView<T> ym = head_matrix<T>(y, b, h);
  using Stat = std::conditional_t<std::is_same_v<T, double>, double, float>;
  Stat* lse_row = lse.data<Stat>() + (b * q.size(1) + h) * g.Tq;
  for (int64_t r = 0; r < rows; ++r) {
    const T inv = T(1) / l_buf[size_t(r)];
    for (int64_t d = 0; d < D; ++d) ym(i0 + r, d) = acc(r, d) * inv;
    lse_row[i0 + r] = Stat(m_buf[size_t(r)] + std::log(l_buf[size_t(r)]));
  }
}

template <class T>
void backward_head(const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v, const Tensor& grad_y,
                   const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& y, const Tensor& lse,
                   const ops::AttentionParams& p, int64_t b, int64_t h) {
  const Geometry g = geometry_of(q, k, p, b, h);
  const int64_t D = q.size(3);
  const MatrixView<T> qm = head_matrix<T>(q, b, h), km = head_matrix<T>(k, b, h), vm = head_matrix<T>(v, b, h);
  const MatrixView<T> ym = head_matrix<T>(y, b, h), gym = head_matrix<T>(grad_y, b, h);
  const MatrixView<T> gq = head_matrix<T>(grad_q, b, h), gk = head_matrix<T>(grad_k, b, h),
                      gv = head_matrix<T>(grad_v, b, h);
  using Stat = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const Stat* lse_row = lse.data<Stat>() + (b * q.size(1) + h) * g.Tq;
  for (const MatrixView<T>& m : {gq, gk, gv})
    for (int64_t i = 0; i < m.rows; ++i) std::fill(&m(i, 0), &m(i, 0) + D, T(0));
  const T scale = T(p.scale);
  thread_local std::vector<T> s_buf, dp_buf, d_buf;
  d_buf.resize(size_t(g.Tq));
  for (int64_t i = 0; i < g.Tq; ++i) {
    T dot = 0;
    for (int64_t d = 0; d < D; ++d) dot += gym(i, d) * ym(i, d);
    d_buf[size_t(i)] = dot;
  }
  for (int64_t i0 = 0; i0 < g.Tq; i0 += kBlock) {
    const int64_t i1 = std::min(g.Tq, i0 + kBlock), rows = i1 - i0;
    const MatrixView<const T> q_blk = as_const(rows_of(qm, i0, i1)), gy_blk = as_const(rows_of(gym, i0, i1));
    const int64_t end = g.key_end(i1);
    for (int64_t j0 = 0; j0 < end; j0 += kBlock) {
      const int64_t j1 = std::min(end, j0 + kBlock), cols = j1 - j0;
      const MatrixView<T> s = scratch(s_buf, rows, cols), dp = scratch(dp_buf, rows, cols);
      gemm(s, q_blk, as_const(rows_of(km, j0, j1).transposed()));
      gemm(dp, gy_blk, as_const(rows_of(vm, j0, j1).transposed()));
      // s becomes P o Z (what grad_v needs), dp becomes scale * dS (what grad_q and grad_k need).
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t i = i0 + r;
        const T row_lse = T(lse_row[i]), row_d = d_buf[size_t(i)];
        for (int64_t c = 0; c < cols; ++c) {
          const int64_t j = j0 + c;
          const T weight = g.visible(i, j) ? std::exp(s(r, c) * scale - row_lse) : T(0);
          const T z = g.keep<T>(i, j);
          s(r, c) = weight * z;
          dp(r, c) = scale * weight * (z * dp(r, c) - row_d);
        }
      }
      gemm(rows_of(gv, j0, j1), as_const(s.transposed()), gy_blk, /*accumulate=*/true);
      gemm(rows_of(gq, i0, i1), as_const(dp), as_const(rows_of(km, j0, j1)), /*accumulate=*/true);
      gemm(rows_of(gk, j0, j1), as_const(dp.transposed()), q_blk, /*accumulate=*/true);
    }
  }
}

}  // namespace

void attention_forward(const Tensor& y, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                       const ops::AttentionParams& p) {
  visit_float(q.dtype(), "attention_forward", [&](auto tag) {
    using T = decltype(tag);
    const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2);
    const int64_t blocks = (Tq + kBlock - 1) / kBlock;
    parallel_for(B * H * blocks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t bh = t / blocks, i0 = t % blocks * kBlock;
        forward_block<T>(y, lse, q, k, v, p, bh / H, bh % H, i0, std::min(Tq, i0 + kBlock));
      }
    });
  });
}

void attention_backward(const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v, const Tensor& grad_y,
                        const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& y, const Tensor& lse,
                        const ops::AttentionParams& p) {
  visit_float(q.dtype(), "attention_backward", [&](auto tag) {
    using T = decltype(tag);
    const int64_t B = q.size(0), H = q.size(1);
    parallel_for(B * H, 1, [&](int64_t begin, int64_t end) {
      for (int64_t bh = begin; bh < end; ++bh)
        backward_head<T>(grad_q, grad_k, grad_v, grad_y, q, k, v, y, lse, p, bh / H, bh % H);
    });
  });
}

}  // namespace brigade::cpu
