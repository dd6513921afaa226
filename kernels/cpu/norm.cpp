// CPU reference: layer_norm and rms_norm over the last dim, forward and backward.
//
// Row statistics are accumulated in double (cheap next to the memory traffic, and it keeps long rows
// accurate in f32). Rows are independent, so forward and input-gradient kernels thread over rows; the
// parameter gradients sum over rows, so they thread over columns instead and each column sums its
// rows in order — the same result for any thread count.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/kernels.h"

namespace brigade::cpu {
namespace {

// ~32K elements per chunk of rows keeps thread start-up negligible.
int64_t row_grain(int64_t d) { return std::max<int64_t>(1, (int64_t(1) << 15) / std::max<int64_t>(d, 1)); }

template <class T>
const T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

// Shared forward: centred (layer_norm) when mean_out is non-null, else rms_norm. With a residual,
// each row is first summed into `sum` and the sum is normalised.
template <class T>
void norm_forward(const Tensor& y, T* mean_out, T* rstd_out, const Tensor& x, const Tensor& weight,
                  const Tensor& bias, double eps, const Tensor& residual = Tensor(), const Tensor& sum = Tensor()) {
  const int64_t d = x.size(-1);
  const int64_t rows = d == 0 ? 0 : x.numel() / d;
  const T* px = x.data<T>();
  const T* pres = data_or_null<T>(residual);
  T* psum = residual.defined() ? sum.data<T>() : nullptr;
  T* py = y.data<T>();
  const T* w = data_or_null<T>(weight);
  const T* b = data_or_null<T>(bias);
  parallel_for(rows, row_grain(d), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T* xr = px + r * d;
      T* yr = py + r * d;
      if (pres) {
        T* sr = psum + r * d;
        for (int64_t i = 0; i < d; ++i) sr[i] = xr[i] + pres[r * d + i];
        xr = sr;
      }
      double mean = 0;
      if (mean_out) {
        for (int64_t i = 0; i < d; ++i) mean += double(xr[i]);
        mean /= double(d);
      }
      double sq = 0;  // sum of (x - mean)^2; mean is 0 for rms_norm
      for (int64_t i = 0; i < d; ++i) sq += (double(xr[i]) - mean) * (double(xr[i]) - mean);
      const double rstd = 1.0 / std::sqrt(sq / double(d) + eps);
      const T m = T(mean), s = T(rstd);
      for (int64_t i = 0; i < d; ++i) {
        T v = (xr[i] - m) * s;
        if (w) v *= w[i];
        if (b) v += b[i];
        yr[i] = v;
      }
      if (mean_out) mean_out[r] = T(mean);
      rstd_out[r] = T(rstd);
    }
  });
}

// grad_x = rstd * (gw - mean(gw) - x_hat * mean(gw * x_hat)) with gw = grad_y * weight; rms_norm
// (no mean) drops the mean(gw) term, since its forward doesn't subtract a mean.
template <class T>
void norm_backward_input_impl(const Tensor& grad_x, const Tensor& grad_y, const Tensor& x, const Tensor& weight,
                              const T* mean, const T* rstd, const T* grad_sum) {
  const int64_t d = x.size(-1);
  const int64_t rows = d == 0 ? 0 : x.numel() / d;
  const T* px = x.data<T>();
  const T* pg = grad_y.data<T>();
  T* pdx = grad_x.data<T>();
  const T* w = data_or_null<T>(weight);
  parallel_for(rows, row_grain(d), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T* xr = px + r * d;
      const T* gr = pg + r * d;
      T* dxr = pdx + r * d;
      const T m = mean ? T(mean[r]) : T(0), s = T(rstd[r]);
      double sum_gw = 0, sum_gw_xhat = 0;
      for (int64_t i = 0; i < d; ++i) {
        const T gw = w ? gr[i] * w[i] : gr[i];
        sum_gw += double(gw);
        sum_gw_xhat += double(gw) * double((xr[i] - m) * s);
      }
      const T mean_gw = mean ? T(sum_gw / double(d)) : T(0);
      const T mean_gw_xhat = T(sum_gw_xhat / double(d));
      for (int64_t i = 0; i < d; ++i) {
        const T gw = w ? gr[i] * w[i] : gr[i];
        dxr[i] = s * (gw - mean_gw - (xr[i] - m) * s * mean_gw_xhat);
        if (grad_sum) dxr[i] += grad_sum[r * d + i];
      }
    }
  });
}

template <class T>
void norm_backward_params_impl(const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& grad_y,
                               const Tensor& x, const T* mean, const T* rstd) {
  const int64_t d = x.size(-1);
  const int64_t rows = d == 0 ? 0 : x.numel() / d;
  const T* px = x.data<T>();
  const T* pg = grad_y.data<T>();
  T* dw = grad_weight.defined() ? grad_weight.data<T>() : nullptr;
  T* db = grad_bias.defined() ? grad_bias.data<T>() : nullptr;
  // Columns [begin, end) per chunk; every column walks all rows in order.
  const int64_t grain = std::max<int64_t>(16, (int64_t(1) << 15) / std::max<int64_t>(rows, 1));
  parallel_for(d, grain, [&](int64_t begin, int64_t end) {
    std::vector<double> acc_w(size_t(end - begin), 0.0), acc_b(size_t(end - begin), 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      const T* xr = px + r * d;
      const T* gr = pg + r * d;
      const T m = mean ? T(mean[r]) : T(0), s = T(rstd[r]);
      for (int64_t i = begin; i < end; ++i) {
        if (dw) acc_w[size_t(i - begin)] += double(gr[i] * ((xr[i] - m) * s));
        if (db) acc_b[size_t(i - begin)] += double(gr[i]);
      }
    }
    for (int64_t i = begin; i < end; ++i) {
      if (dw) dw[i] = T(acc_w[size_t(i - begin)]);
      if (db) db[i] = T(acc_b[size_t(i - begin)]);
    }
  });
}

}  // namespace

void layer_norm(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& weight,
                const Tensor& bias, double eps, const Tensor& residual, const Tensor& sum) {
  visit_float(x.dtype(), "layer_norm", [&](auto tag) {
    using T = decltype(tag);
    norm_forward<T>(y, mean.data<T>(), rstd.data<T>(), x, weight, bias, eps, residual, sum);
  });
}

void rms_norm(const Tensor& y, const Tensor& rstd, const Tensor& x, const Tensor& weight, double eps) {
  visit_float(x.dtype(), "rms_norm", [&](auto tag) {
    using T = decltype(tag);
    norm_forward<T>(y, nullptr, rstd.data<T>(), x, weight, Tensor(), eps);
  });
}

void norm_backward_input(const Tensor& grad_x, const Tensor& grad_y, const Tensor& x, const Tensor& weight,
                         const Tensor& mean, const Tensor& rstd, const Tensor& grad_sum) {
  visit_float(x.dtype(), "norm_backward_input", [&](auto tag) {
    using T = decltype(tag);
    norm_backward_input_impl<T>(grad_x, grad_y, x, weight, data_or_null<T>(mean), rstd.data<T>(),
                                data_or_null<T>(grad_sum));
  });
}

void norm_backward_params(const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& grad_y, const Tensor& x,
                          const Tensor& mean, const Tensor& rstd) {
  visit_float(x.dtype(), "norm_backward_params", [&](auto tag) {
    using T = decltype(tag);
    norm_backward_params_impl<T>(grad_weight, grad_bias, grad_y, x, data_or_null<T>(mean), rstd.data<T>());
  });
}

}  // namespace brigade::cpu
