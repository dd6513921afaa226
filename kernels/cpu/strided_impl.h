// Template definitions for kernels/cpu/strided.h.
#pragma once

#include <algorithm>

#include "core/parallel.h"

namespace brigade::cpu {

template <class RowFn>
void for_each_row(const Shape& shape, const std::vector<const Tensor*>& operands, RowFn&& row) {
  const size_t k = operands.size();
  const int64_t ndim = int64_t(shape.size());
  const int64_t numel = shape_numel(shape);
  if (numel == 0) return;
  const int64_t length = ndim == 0 ? 1 : shape.back();
  const int64_t rows = numel / length;

  std::vector<Strides> strides(k);
  std::vector<char*> bases(k);
  std::vector<int64_t> elem(k), inner(k);
  for (size_t j = 0; j < k; ++j) {
    strides[j] = broadcast_strides(*operands[j], shape);
    bases[j] = static_cast<char*>(operands[j]->raw_data());
    elem[j] = int64_t(operands[j]->element_size());
    inner[j] = ndim == 0 ? 0 : strides[j].back();
  }

  // Rows [begin, end): start the odometer at `begin`, then step it.
  auto run = [&](int64_t begin, int64_t end) {
    std::vector<int64_t> idx(size_t(std::max<int64_t>(ndim - 1, 0)), 0);
    int64_t rest = begin;
    for (int64_t d = ndim - 2; d >= 0; --d) {
      idx[size_t(d)] = rest % shape[size_t(d)];
      rest /= shape[size_t(d)];
    }
    std::vector<char*> ptrs(k);
    for (int64_t r = begin; r < end; ++r) {
      for (size_t j = 0; j < k; ++j) {
        int64_t off = 0;
        for (int64_t d = 0; d < ndim - 1; ++d) off += idx[size_t(d)] * strides[j][size_t(d)];
        ptrs[j] = bases[j] + off * elem[j];
      }
      row(ptrs, inner, length);
      for (int64_t d = ndim - 2; d >= 0; --d) {
        if (++idx[size_t(d)] < shape[size_t(d)]) break;
        idx[size_t(d)] = 0;
      }
    }
  };
  // Roughly 32K elements per chunk keeps thread start-up cost negligible.
  int64_t grain = std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(length, 1));
  parallel_for(rows, grain, run);
}

}  // namespace brigade::cpu
