// CPU reference: embedding forward (a row gather) and backward (a deterministic scatter-add).
//
// The backward is where determinism needs care: many positions can hit the same row (the same token
// repeated in a batch), and adding them from several threads in whatever order they arrive would make
// the low bits depend on timing. Instead the positions are first bucketed by row with a stable
// counting sort, and then each row — owned by exactly one thread — adds its bucket in position order.
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/kernels.h"

namespace brigade::cpu {

void embedding(const Tensor& out, const Tensor& weight, const Tensor& indices) {
  const int64_t n = indices.numel();
  const size_t row_bytes = size_t(weight.size(1)) * weight.element_size();
  const int64_t* idx = indices.data<int64_t>();
  const char* src = static_cast<const char*>(weight.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 17) / std::max<int64_t>(int64_t(row_bytes), 1));
  parallel_for(n, grain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      std::memcpy(dst + size_t(i) * row_bytes, src + size_t(idx[i]) * row_bytes, row_bytes);
  });
}

void embedding_backward(const Tensor& grad_weight, const Tensor& grad_y, const Tensor& indices) {
  const int64_t num_rows = grad_weight.size(0), d = grad_weight.size(1), n = indices.numel();
  const int64_t* idx = indices.data<int64_t>();

  // Counting sort of positions by row: bucket v is positions[start[v] .. start[v + 1]), increasing.
  std::vector<int64_t> start(size_t(num_rows) + 1, 0);
  std::vector<int64_t> positions(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    // The op layer checked the indices, possibly at the forward (ops::CheckedIndices), which cannot
    // see a write through a raw pointer since; one compare keeps such a write from becoming an
    // out-of-bounds one. (The CUDA backward only ever writes rows [0, num_rows).)
    BRIGADE_CHECK(idx[i] >= 0 && idx[i] < num_rows, "embedding_backward: index ", idx[i], " at position ", i,
                  " is out of range for a table of ", num_rows, " rows (written after it was checked?)");
    ++start[size_t(idx[i]) + 1];
  }
  for (int64_t v = 0; v < num_rows; ++v) start[size_t(v) + 1] += start[size_t(v)];
  std::vector<int64_t> fill(start.begin(), start.end() - 1);
  for (int64_t i = 0; i < n; ++i) positions[size_t(fill[size_t(idx[i])]++)] = i;

  visit_float(grad_weight.dtype(), "embedding_backward", [&](auto tag) {
    using T = decltype(tag);
    T* gw = grad_weight.data<T>();
    const T* gy = grad_y.data<T>();
    const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 15) / std::max<int64_t>(d, 1));
    parallel_for(num_rows, grain, [&](int64_t begin, int64_t end) {
      for (int64_t v = begin; v < end; ++v) {
        T* row = gw + v * d;
        std::fill(row, row + d, T(0));
        for (int64_t s = start[size_t(v)]; s < start[size_t(v) + 1]; ++s) {
          const T* g = gy + positions[size_t(s)] * d;
          for (int64_t j = 0; j < d; ++j) row[j] += g[j];
        }
      }
    });
  });
}

}  // namespace brigade::cpu
