// Cross-backend cases: layer_norm, rms_norm, add_layer_norm, embedding, cross_entropy, dropout.
#pragma once

#if BRIGADE_HAVE_CUDA

#include "cases_elementwise.h"

namespace gpu_test {

// Norms over the last dim, from rows of 1 element to rows longer than one block handles at once;
// with and without the affine parameters; inputs far from zero mean (a one-pass variance loses them).
inline std::vector<OpCase> norm_cases() {
  struct Rows {
    int64_t rows, dim;
    Layout layout;
    double shift;
  };
  const std::vector<Rows> shapes = {
      {1, 1, contiguous, 0},   {7, 3, contiguous, 0},   {33, 17, transposed, 0}, {5, 64, contiguous, 0},
      {9, 257, strided, 0},    {4, 768, contiguous, 0}, {3, 1025, offset, 0},    {2, 4099, contiguous, 0},
      {16, 300, contiguous, 1000},
      // The 16-byte vector path (row_vectors.cuh): widths a multiple of 8 (every row vectorised),
      // 21 (rows whose phase differs from the weight's take the scalar path), a block's row of 2053.
      {6, 24, contiguous, 0},  {5, 21, contiguous, 0},  {3, 2053, contiguous, 0},
  };
  std::vector<OpCase> cases;
  for (DType t : {DType::f32, DType::bf16, DType::f64}) {
    for (size_t i = 0; i < shapes.size(); ++i) {
      if (t == DType::f64 && i % 3 != 0) continue;
      const Rows r = shapes[i];
      const Input x = floats({r.rows, r.dim}, t, r.layout).shifted(r.shift);
      const Input w = floats({r.dim}, t).shifted(1.0), b = floats({r.dim}, t);
      const std::string shift = r.shift != 0 ? " mean 1000" : "";
      cases.push_back(make_case(
          "layer_norm", {x, w, b},
          [](const std::vector<Tensor>& in) { return std::vector<Tensor>{layer_norm(in[0], in[1], in[2])}; },
          Accuracy::reduction, "weight and bias" + shift));
      if (i % 2 == 0) {
        cases.push_back(make_case(
            "layer_norm", {x, w},
            [](const std::vector<Tensor>& in) { return std::vector<Tensor>{layer_norm(in[0], in[1], Tensor())}; },
            Accuracy::reduction, "weight only" + shift));
        cases.push_back(make_case(
            "layer_norm", {x},
            [](const std::vector<Tensor>& in) { return std::vector<Tensor>{layer_norm(in[0], Tensor(), Tensor())}; },
            Accuracy::reduction, "no affine" + shift));
      }
      // A one-element row's rms_norm input gradient is gw * eps / (x^2 + eps)^1.5: for |x| >> sqrt(eps)
      // it is the difference of two nearly equal numbers, so f32 noise of either backend dominates
      // (a ~6% relative error at |x| = 1). Such rows get |x| near sqrt(eps) = 1e-3, where it is
      // well conditioned; longer rows keep the standard normal.
      const Input x_rms = r.dim == 1 ? Input(x).scaled(1e-3) : x;
      cases.push_back(make_case(
          "rms_norm", {x_rms, w},
          [](const std::vector<Tensor>& in) { return std::vector<Tensor>{rms_norm(in[0], in[1])}; },
          Accuracy::reduction, "weight" + shift));
      // The residual add fused with the norm: both outputs, and gradients through both.
      if (i % 2 == 0) {
        cases.push_back(make_case(
            "add_layer_norm", {x, floats({r.rows, r.dim}, t), w, b},
            [](const std::vector<Tensor>& in) {
              auto [h, y] = add_layer_norm(in[0], in[1], in[2], in[3]);
              return std::vector<Tensor>{h, y};
            },
            Accuracy::reduction, "weight and bias" + shift));
      }
      if (i % 2 == 1) {
        cases.push_back(make_case(
            "rms_norm", {x_rms},
            [](const std::vector<Tensor>& in) { return std::vector<Tensor>{rms_norm(in[0], Tensor())}; },
            Accuracy::reduction, "no weight" + shift));
      }
    }
  }
  // A 3-D input: every leading dim is a row.
  cases.push_back(make_case(
      "layer_norm", {floats({2, 5, 96}, DType::f32), floats({96}, DType::f32), floats({96}, DType::f32)},
      [](const std::vector<Tensor>& in) { return std::vector<Tensor>{layer_norm(in[0], in[1], in[2])}; },
      Accuracy::reduction, "3-D"));
  return cases;
}

// embedding: forward gather, and the deterministic backward scatter with many repeated indices.
inline std::vector<OpCase> embedding_cases() {
  struct Table {
    int64_t rows, dim;
    Shape idx;
    DType index_dtype;
  };
  const std::vector<Table> tables = {
      {1, 1, {5}, DType::i64},         {7, 3, {3, 17}, DType::i64},     {7, 64, {2, 33}, DType::i32},
      {1000, 257, {4, 9}, DType::i64}, {5, 768, {1029}, DType::i64},  // ~200 repeats of every row
      {50257, 65, {2, 7}, DType::i32},
      // Runs of ~100 repeats: 20 columns (vectors in f32, one column per lane in bf16), 24 (vectors in both).
      {3, 20, {300}, DType::i64},      {4, 24, {2, 129}, DType::i64},
  };
  std::vector<OpCase> cases;
  for (DType t : {DType::f32, DType::bf16}) {
    for (const Table& tb : tables) {
      cases.push_back(make_case(
          "embedding", {floats({tb.rows, tb.dim}, t), indices(tb.idx, tb.rows, tb.index_dtype)},
          [](const std::vector<Tensor>& in) { return std::vector<Tensor>{embedding(in[0], in[1])}; },
          Accuracy::reduction));
    }
  }
  return cases;
}

// cross_entropy: fused log-softmax + NLL, ignore_index, mean and sum, classes from 1 to 50257.
inline std::vector<OpCase> cross_entropy_cases() {
  struct Logits {
    int64_t rows, classes;
    Layout layout;
  };
  // {6, 37}: rows at every phase (a scalar head and tail around the 16-byte vectors); {5, 2051}
  // offset: a block's row with a misaligned base.
  const std::vector<Logits> sizes = {{1, 1, contiguous},     {7, 3, contiguous},      {65, 17, transposed},
                                     {16, 1000, contiguous}, {9, 5003, contiguous},   {4, 50257, contiguous},
                                     {6, 37, contiguous},    {5, 2051, offset}};
  std::vector<OpCase> cases;
  for (DType t : {DType::f32, DType::bf16, DType::f64}) {
    for (Reduction red : {Reduction::mean, Reduction::sum}) {
      for (size_t i = 0; i < sizes.size(); ++i) {
        if (t == DType::f64 && i % 2 != 0) continue;
        const auto [rows, classes, layout] = sizes[i];
        cases.push_back(make_case(
            "cross_entropy",
            {floats({rows, classes}, t, layout).scaled(3.0), targets({rows}, classes)},
            [red](const std::vector<Tensor>& in) {
              return std::vector<Tensor>{cross_entropy(in[0], in[1], kIgnoreIndex, red)};
            },
            Accuracy::reduction, red == Reduction::mean ? "mean" : "sum"));
      }
    }
  }
  // i32 targets, and a batch in which every target is ignored (the mean of nothing is 0).
  cases.push_back(make_case(
      "cross_entropy", {floats({33, 10}, DType::f32), targets({33}, 10, DType::i32)},
      [](const std::vector<Tensor>& in) { return std::vector<Tensor>{cross_entropy(in[0], in[1])}; },
      Accuracy::reduction, "i32 targets"));
  cases.push_back(make_case(
      "cross_entropy", {floats({3, 10}, DType::f32)},
      [](const std::vector<Tensor>& in) {
        Tensor all_ignored = full({3}, double(kIgnoreIndex), DType::i64, in[0].device());
        return std::vector<Tensor>{cross_entropy(in[0], all_ignored)};
      },
      Accuracy::reduction, "every target ignored"));
  return cases;
}

// dropout with an explicit (seed, offset): the mask is a function of them, so both devices must
// drop exactly the same elements. (test_gpu_ops.cpp also checks the mask itself on a large tensor.)
inline std::vector<OpCase> dropout_cases() {
  std::vector<OpCase> cases;
  for (DType t : {DType::f32, DType::bf16, DType::f16}) {
    for (double p : {0.0, 0.1, 0.5}) {
      cases.push_back(make_case(
          "dropout", {floats({33, 17}, t)},
          [p](const std::vector<Tensor>& in) { return std::vector<Tensor>{dropout(in[0], p, 1234, 77)}; },
          Accuracy::elementwise, "p " + std::to_string(p).substr(0, 3)));
    }
    cases.push_back(make_case(
        "dropout", {floats({4099}, t, offset)},
        [](const std::vector<Tensor>& in) { return std::vector<Tensor>{dropout(in[0], 0.3, 99, 1u << 20)}; },
        Accuracy::elementwise, "p 0.3 misaligned"));
    // The overload without a seed takes (seed, offset) from the default generator: reseeded before
    // each device's run, both see the same counters.
    cases.push_back(make_case(
        "dropout", {floats({65, 33}, t)},
        [](const std::vector<Tensor>& in) {
          manual_seed(2024);
          return std::vector<Tensor>{dropout(dropout(in[0], 0.2), 0.4)};
        },
        Accuracy::elementwise, "default generator twice"));
    cases.push_back(make_case(
        "dropout", {floats({17, 33}, t, transposed)},
        [](const std::vector<Tensor>& in) { return std::vector<Tensor>{dropout(in[0], 0.3, 5, 0)}; },
        Accuracy::elementwise, "p 0.3 transposed"));
  }
  return cases;
}

}  // namespace gpu_test

#endif  // BRIGADE_HAVE_CUDA
