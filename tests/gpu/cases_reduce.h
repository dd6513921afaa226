// Cross-backend cases: reductions (sum, mean, max, argmax, sum_to) and softmax / log_softmax.
#pragma once

#if BRIGADE_HAVE_CUDA

#include "cases_elementwise.h"

namespace gpu_test {

// sum and mean over every kind of dim set, keepdim or not, contiguous or not.
inline std::vector<OpCase> sum_mean_cases(std::mt19937_64& rng) {
  struct Reduce {
    Shape shape;
    Layout layout;
    std::vector<int64_t> dims;  // empty: all
    bool keepdim;
  };
  const std::vector<Reduce> reductions = {
      {{1}, contiguous, {}, false},
      {{257}, contiguous, {}, false},
      {{100003}, offset, {}, false},  // long enough for a multi-block reduction
      {{33, 17}, contiguous, {0}, false},
      {{33, 17}, contiguous, {1}, true},
      {{4, 33, 17}, contiguous, {0, 2}, false},
      {{4, 33, 17}, transposed, {-1}, false},
      {{4, 33, 17}, strided, {1}, true},
      {{5, 1, 7}, contiguous, {1}, false},
      {{1031, 3}, contiguous, {0}, false},
      {{3, 1031}, contiguous, {1}, false},
      {{2, 3, 4, 5}, contiguous, {1, 3}, true},
      {{6, 33, 17}, expanded, {0}, false},
      {{random_size(rng), random_size(rng)}, transposed, {0}, false},
  };
  std::vector<OpCase> cases;
  for (bool mean : {false, true}) {
    for (DType t : {DType::f32, DType::bf16, DType::f16, DType::f64}) {
      const bool all = t == DType::f32 || t == DType::bf16;
      for (size_t i = 0; i < reductions.size(); ++i) {
        if ((!all || mean) && i % 2 != 0) continue;
        const Reduce r = reductions[i];
        std::string detail = "dims";
        for (int64_t d : r.dims) detail.append(" ").append(std::to_string(d));
        if (r.dims.empty()) detail += " all";
        if (r.keepdim) detail += " keepdim";
        cases.push_back(make_case(
            mean ? "mean" : "sum", {floats(r.shape, t, r.layout)},
            [r, mean](const std::vector<Tensor>& in) {
              if (r.dims.empty()) return std::vector<Tensor>{mean ? brigade::mean(in[0]) : brigade::sum(in[0])};
              return std::vector<Tensor>{mean ? brigade::mean(in[0], r.dims, r.keepdim)
                                              : brigade::sum(in[0], r.dims, r.keepdim)};
            },
            Accuracy::reduction, detail));
      }
    }
  }
  return cases;
}

// max (values with their gradient, and indices) and argmax: first index on ties, on both devices.
inline std::vector<OpCase> max_cases() {
  struct Along {
    Shape shape;
    Layout layout;
    int64_t dim;
    bool keepdim;
  };
  const std::vector<Along> cases_along = {
      {{1}, contiguous, 0, false},       {{1029}, contiguous, 0, false},  {{33, 17}, contiguous, 0, false},
      {{33, 17}, contiguous, 1, true},   {{17, 33}, transposed, -1, false}, {{4, 33, 17}, strided, 1, true},
      {{4, 3, 5000}, contiguous, 2, false},
  };
  std::vector<OpCase> cases;
  for (DType t : {DType::f32, DType::bf16, DType::f64}) {
    for (const Along& a : cases_along) {
      const std::string detail = "dim " + std::to_string(a.dim) + (a.keepdim ? " keepdim" : "");
      cases.push_back(make_case(
          "max", {floats(a.shape, t, a.layout)},
          [a](const std::vector<Tensor>& in) {
            const Tensor indices = ops::max(in[0], a.dim, a.keepdim).second;  // ops:: records nothing
            return std::vector<Tensor>{brigade::max(in[0], a.dim, a.keepdim), indices};
          },
          Accuracy::elementwise, detail));
      cases.push_back(make_case(
          "argmax", {floats(a.shape, t, a.layout).no_grad()},
          [a](const std::vector<Tensor>& in) { return std::vector<Tensor>{brigade::argmax(in[0], a.dim, a.keepdim)}; },
          Accuracy::elementwise, detail));
    }
  }
  // bf16 has few distinct values near the maximum, so ties are common: both must pick the first.
  cases.push_back(make_case(
      "argmax", {floats({65, 300}, DType::bf16).scaled(0.01).no_grad()},
      [](const std::vector<Tensor>& in) { return std::vector<Tensor>{brigade::argmax(in[0], 1, false)}; },
      Accuracy::elementwise, "many ties"));
  return cases;
}

// sum_to, the reduction behind every broadcasting backward (raw op: no gradient of its own).
inline std::vector<OpCase> sum_to_cases() {
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{4, 33, 17}, {33, 1}}, {{4, 33, 17}, {17}}, {{4, 33, 17}, {1, 33, 17}}, {{33, 17}, {}}, {{1029, 5}, {1, 5}},
  };
  std::vector<OpCase> cases;
  for (DType t : {DType::f32, DType::bf16}) {
    for (const auto& [from, to] : shapes) {
      Shape target = to;
      OpCase c = make_case(
          "sum_to", {floats(from, t, from.size() >= 2 ? transposed : contiguous)},
          [target](const std::vector<Tensor>& in) { return std::vector<Tensor>{ops::sum_to(in[0], target)}; },
          Accuracy::reduction, "to " + shape_text(to));
      c.backward = false;
      cases.push_back(c);
    }
  }
  return cases;
}

// softmax and log_softmax along every dim, rows of 1 to 4099 elements, large logits.
inline std::vector<OpCase> softmax_cases() {
  struct Along {
    Shape shape;
    Layout layout;
    int64_t dim;
    double scale;
  };
  const std::vector<Along> rows = {
      {{7, 1}, contiguous, -1, 1},    {{33, 17}, contiguous, -1, 1},  {{33, 17}, contiguous, 0, 1},
      {{4, 33, 17}, contiguous, 1, 1}, {{3, 1025}, contiguous, -1, 1}, {{2, 4099}, offset, -1, 1},
      {{5, 3}, transposed, -1, 1},    {{9, 257}, strided, -1, 1},     {{8, 300}, contiguous, -1, 30},  // exp overflows unless max-subtracted
      // The 16-byte vector path (row_vectors.cuh): rows of 37 start at every phase, so each has a
      // scalar head, whole vectors and a scalar tail; a block's row of 2051 the same; a
      // misaligned base.
      {{6, 37}, contiguous, -1, 1},   {{3, 2051}, contiguous, -1, 1}, {{5, 37}, offset, -1, 1},
  };
  std::vector<OpCase> cases;
  for (bool log : {false, true}) {
    for (DType t : {DType::f32, DType::bf16, DType::f16, DType::f64}) {
      const bool all = t == DType::f32 || t == DType::bf16;
      for (size_t i = 0; i < rows.size(); ++i) {
        if (!all && i % 3 != 0) continue;
        const Along a = rows[i];
        cases.push_back(make_case(
            log ? "log_softmax" : "softmax", {floats(a.shape, t, a.layout).scaled(a.scale)},
            [a, log](const std::vector<Tensor>& in) {
              return std::vector<Tensor>{log ? log_softmax(in[0], a.dim) : softmax(in[0], a.dim)};
            },
            Accuracy::reduction, "dim " + std::to_string(a.dim) + (a.scale != 1 ? " large logits" : "")));
      }
    }
  }
  return cases;
}

}  // namespace gpu_test

#endif  // BRIGADE_HAVE_CUDA
