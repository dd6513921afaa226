// Template definitions for kernels/cpu/strided.h.
#pragma once

#include <algorithm>

#include "core/parallel.h"

namespace brigade::cpu {

// Roughly 32K elements per thread chunk keeps thread start-up cost negligible next to the work.
inline constexpr int64_t kElementsPerChunk = int64_t(1) << 15;

template <class RowFn>
void for_each_row(const Shape& shape, const std::vector<const Tensor*>& operands, RowFn&& row) {
  const int64_t numel = shape_numel(shape);
  if (numel == 0) return;
  const LoopNest nest = coalesce(shape, operands);
  const size_t k = operands.size();
  const size_t ndim = nest.shape.size();
  const int64_t length = nest.shape.back();

  std::vector<char*> bases(k);
  std::vector<int64_t> elem(k), inner(k);
  for (size_t j = 0; j < k; ++j) {
    bases[j] = static_cast<char*>(operands[j]->raw_data());
    elem[j] = int64_t(operands[j]->element_size());
    inner[j] = nest.strides[j].back();
  }

  // Elements [begin, end) in row-major order: find where `begin` sits in the loop nest, then hand
  // out runs along the last dim, carrying into the outer dims like an odometer.
  auto run = [&](int64_t begin, int64_t end) {
    std::vector<int64_t> idx(ndim);
    int64_t rest = begin;
    for (size_t d = ndim; d-- > 0;) {
      idx[d] = rest % nest.shape[d];
      rest /= nest.shape[d];
    }
    std::vector<char*> ptrs(k);
    while (begin < end) {
      const int64_t n = std::min(length - idx.back(), end - begin);
      for (size_t j = 0; j < k; ++j) {
        int64_t off = 0;
        for (size_t d = 0; d < ndim; ++d) off += idx[d] * nest.strides[j][d];
        ptrs[j] = bases[j] + off * elem[j];
      }
      row(ptrs, inner, n);
      begin += n;
      // Unless the chunk is done, the run reached the end of its row: wrap and carry.
      idx.back() = 0;
      for (size_t d = ndim - 1; d-- > 0;) {
        if (++idx[d] < nest.shape[d]) break;
        idx[d] = 0;
      }
    }
  };
  parallel_for(numel, kElementsPerChunk, run);
}

template <class LineFn>
void for_each_line(const Shape& shape, int64_t dim, const std::vector<const Tensor*>& operands, LineFn&& line) {
  const int64_t numel = shape_numel(shape);
  if (numel == 0) return;
  const size_t k = operands.size();
  const int64_t length = shape[size_t(dim)];
  const int64_t lines = numel / length;

  // The other dims, outermost first, with each operand's strides along them and along `dim`.
  Shape outer;
  std::vector<Strides> outer_strides(k);
  std::vector<int64_t> along(k), elem(k);
  std::vector<char*> bases(k);
  std::vector<Strides> full(k);
  for (size_t j = 0; j < k; ++j) {
    full[j] = broadcast_strides(*operands[j], shape);
    along[j] = full[j][size_t(dim)];
    elem[j] = int64_t(operands[j]->element_size());
    bases[j] = static_cast<char*>(operands[j]->raw_data());
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    if (int64_t(d) == dim) continue;
    outer.push_back(shape[d]);
    for (size_t j = 0; j < k; ++j) outer_strides[j].push_back(full[j][d]);
  }

  auto run = [&](int64_t begin, int64_t end) {
    std::vector<char*> ptrs(k);
    std::vector<int64_t> off(k);
    for (int64_t l = begin; l < end; ++l) {
      std::fill(off.begin(), off.end(), 0);
      int64_t rest = l;
      for (size_t d = outer.size(); d-- > 0;) {
        const int64_t i = rest % outer[d];
        rest /= outer[d];
        for (size_t j = 0; j < k; ++j) off[j] += i * outer_strides[j][d];
      }
      for (size_t j = 0; j < k; ++j) ptrs[j] = bases[j] + off[j] * elem[j];
      line(ptrs, along, length);
    }
  };
  parallel_for(lines, std::max<int64_t>(1, kElementsPerChunk / length), run);
}

}  // namespace brigade::cpu
