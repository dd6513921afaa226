// CPU reference: cross entropy over [N, C] logits, without ever materialising the softmax.
//
// Forward: per row, lse = max + log(sum exp(x - max)) (subtracting the max keeps exp from
// overflowing), and the row's loss is lse - x[target], i.e. -log softmax(x)[target].
// Backward: d loss / d x = softmax(x) - onehot(target) = exp(x - lse) - onehot, from the saved lse.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/kernels.h"

namespace brigade::cpu {
namespace {

int64_t row_grain(int64_t c) { return std::max<int64_t>(1, (int64_t(1) << 14) / std::max<int64_t>(c, 1)); }

}  // namespace

void cross_entropy(const Tensor& loss, const Tensor& lse, const Tensor& logits, const Tensor& targets,
                   int64_t ignore_index, const ops::LossScale& loss_scale) {
  BRIGADE_CHECK(loss_scale.device_count == nullptr, "cross_entropy: a count on the device is for CUDA kernels only");
  const double scale = loss_scale.value;
  const int64_t n = logits.size(0), c = logits.size(1);
  const int64_t* target = targets.data<int64_t>();
  visit_float(logits.dtype(), "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    const T* x = logits.data<T>();
    T* lse_out = lse.data<T>();
    std::vector<double> row_loss(size_t(n), 0.0);
    parallel_for(n, row_grain(c), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const T* row = x + i * c;
        const T max = c > 0 ? *std::max_element(row, row + c) : T(0);
        double sum = 0;
        for (int64_t j = 0; j < c; ++j) sum += double(std::exp(row[j] - max));
        const double row_lse = double(max) + std::log(sum);
        lse_out[i] = T(row_lse);
        if (target[i] != ignore_index) row_loss[size_t(i)] = row_lse - double(row[target[i]]);
      }
    });
    double total = 0;
    for (double l : row_loss) total += l;  // in row order: the same sum for any thread count
    *loss.data<T>() = T(total * scale);
  });
}

void cross_entropy_backward(const Tensor& grad_logits, const Tensor& logits, const Tensor& targets, const Tensor& lse,
                            const Tensor& grad_loss, int64_t ignore_index, const ops::LossScale& loss_scale) {
  BRIGADE_CHECK(loss_scale.device_count == nullptr,
                "cross_entropy_backward: a count on the device is for CUDA kernels only");
  const double scale = loss_scale.value;
  const int64_t n = logits.size(0), c = logits.size(1);
  const int64_t* target = targets.data<int64_t>();
  // As in embedding_backward: the targets may have been checked at the forward, before a write
  // through a raw pointer; the write below must stay inside the row. (The CUDA kernel compares
  // every column with the target, so it never writes outside the row.)
  for (int64_t i = 0; i < n; ++i)
    BRIGADE_CHECK(target[i] == ignore_index || (target[i] >= 0 && target[i] < c), "cross_entropy_backward: target ",
                  target[i], " at position ", i, " is out of range for ", c, " classes (written after it was checked?)");
  visit_float(logits.dtype(), "cross_entropy_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* x = logits.data<T>();
    const T* lse_in = lse.data<T>();
    const T s = T(double(*grad_loss.data<T>()) * scale);
    T* g = grad_logits.data<T>();
    parallel_for(n, row_grain(c), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        T* grow = g + i * c;
        if (target[i] == ignore_index) {
          std::fill(grow, grow + c, T(0));
          continue;
        }
        const T* row = x + i * c;
        const T row_lse = lse_in[i];
        for (int64_t j = 0; j < c; ++j) grow[j] = s * std::exp(row[j] - row_lse);
        grow[target[i]] -= s;
      }
    });
  });
}

}  // namespace brigade::cpu
