// Cross-backend cases: concat / stack / split, the differentiable views (their backward kernels are
// copies, scatters into zeros and sum_to), dtype conversions, and the in-place ops.
#pragma once

#if BRIGADE_HAVE_CUDA

#include "cases_elementwise.h"

namespace gpu_test {

inline std::vector<OpCase> join_cases() {
  std::vector<OpCase> cases;
  for (DType t : {DType::f32, DType::bf16, DType::i64}) {
    const bool f = is_floating(t);
    auto in = [&](Shape s, Layout l = contiguous) { return f ? floats(std::move(s), t, l) : indices(std::move(s), 1000, t); };
    cases.push_back(make_case(
        "concat", {in({3, 5}), in({4, 5}, transposed), in({1, 5})},
        [](const std::vector<Tensor>& x) { return std::vector<Tensor>{concat(x, 0)}; }, Accuracy::elementwise,
        "dim 0"));
    cases.push_back(make_case(
        "concat", {in({2, 3, 7}), in({2, 3, 1}, strided), in({2, 3, 33})},
        [](const std::vector<Tensor>& x) { return std::vector<Tensor>{concat(x, -1)}; }, Accuracy::elementwise,
        "dim -1"));
    cases.push_back(make_case(
        "stack", {in({17, 3}), in({17, 3}, transposed)},
        [](const std::vector<Tensor>& x) { return std::vector<Tensor>{stack(x, 1)}; }, Accuracy::elementwise,
        "dim 1"));
    if (!f) continue;
    cases.push_back(make_case(
        "split", {in({5, 8}, transposed)},
        [](const std::vector<Tensor>& x) {
          // Each piece is a view; scaling makes them outputs of their own with a gradient path.
          std::vector<Tensor> out;
          for (const Tensor& piece : split(x[0], {2, 5, 1}, 1)) out.push_back(piece * 2.0);
          return out;
        },
        Accuracy::elementwise, "sizes 2 5 1"));
    cases.push_back(make_case(
        "split", {in({7, 3})},
        [](const std::vector<Tensor>& x) {
          std::vector<Tensor> out;
          for (const Tensor& piece : split(x[0], int64_t(3), 0)) out.push_back(piece.contiguous());
          return out;
        },
        Accuracy::elementwise, "chunks of 3"));
  }
  return cases;
}

// Views and copies: the forward is geometry (plus a copy kernel for contiguous/reshape), the
// backward runs the strided copy, the scatter into zeros and sum_to on the GPU.
inline std::vector<OpCase> view_cases() {
  struct View {
    const char* name;
    const char* detail;
    Shape shape;
    Layout layout;
    Tensor (*fn)(const Tensor&);
  };
  const View views[] = {
      {"contiguous", "of a transpose", {33, 17}, contiguous, [](const Tensor& x) { return x.transpose(0, 1).contiguous(); }},
      {"contiguous", "of a permute", {4, 33, 17}, contiguous, [](const Tensor& x) { return x.permute({2, 0, 1}).contiguous(); }},
      {"contiguous", "of a 5-D permute", {2, 3, 4, 5, 7}, strided,
       [](const Tensor& x) { return x.permute({4, 2, 0, 3, 1}).contiguous(); }},
      {"reshape", "of a non-contiguous tensor", {17, 33}, transposed, [](const Tensor& x) { return x.reshape({-1}); }},
      {"view", "", {6, 35}, contiguous, [](const Tensor& x) { return x.view({2, 3, 5, 7}) * 1.0; }},
      {"slice", "step 3", {33, 17}, contiguous, [](const Tensor& x) { return x.slice(1, 1, 16, 3); }},
      {"slice", "rows", {33, 17}, offset, [](const Tensor& x) { return x.slice(0, 2, 30); }},
      {"narrow", "", {4, 33, 17}, transposed, [](const Tensor& x) { return x.narrow(1, 5, 20); }},
      {"select", "", {4, 33, 17}, contiguous, [](const Tensor& x) { return x.select(1, 7); }},
      {"expand", "", {1, 17}, contiguous, [](const Tensor& x) { return x.expand({33, 17}) * 1.0; }},
      {"expand", "size-1 dims", {3, 1, 1}, contiguous, [](const Tensor& x) { return x.expand({3, 129, 5}).contiguous(); }},
      {"unsqueeze", "", {33, 17}, strided, [](const Tensor& x) { return x.unsqueeze(1).squeeze(1).unsqueeze(0); }},
      {"clone", "", {33, 17}, transposed, [](const Tensor& x) { return x.clone(); }},
  };
  std::vector<OpCase> cases;
  for (DType t : {DType::f32, DType::bf16, DType::f16, DType::f64}) {
    for (const View& v : views) {
      auto fn = v.fn;
      cases.push_back(make_case(
          v.name, {floats(v.shape, t, v.layout)},
          [fn](const std::vector<Tensor>& x) { return std::vector<Tensor>{fn(x[0])}; }, Accuracy::elementwise,
          v.detail));
    }
  }
  // to(dtype) is differentiable between floating types.
  for (DType from : {DType::f32, DType::bf16, DType::f16, DType::f64}) {
    for (DType to : {DType::f32, DType::bf16, DType::f16, DType::f64}) {
      if (from == to) continue;
      cases.push_back(make_case(
          "to_dtype", {floats({33, 17}, from, transposed)},
          [to](const std::vector<Tensor>& x) { return std::vector<Tensor>{x[0].to(to)}; }, Accuracy::elementwise,
          std::string("differentiable to ") + dtype_name(to)));
    }
  }
  return cases;
}

// Conversions between every pair of dtypes (rounding to nearest even, truncation to integers) and
// copies into strided destinations from broadcast sources: bit for bit equal to the CPU.
inline std::vector<OpCase> copy_cases() {
  const DType all[] = {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i32, DType::i64};
  std::vector<OpCase> cases;
  for (DType from : all) {
    for (DType to : all) {
      // Contiguous (the vector loop for whole groups of 8, then 5 left over one by one) and at an odd
      // offset (the one-element loop). Floats scaled so integer targets see many distinct values
      // (and fractions to truncate).
      for (Layout layout : {contiguous, offset}) {
        if (!is_floating(from) && layout == offset) continue;
        Input x = is_floating(from) ? floats({1029}, from, layout).scaled(50.0) : indices({1029}, 60000, from);
        OpCase c = make_case(
            "copy", {x}, [to](const std::vector<Tensor>& in) { return std::vector<Tensor>{ops::to_dtype(in[0], to)}; },
            Accuracy::elementwise, std::string("to ") + dtype_name(to) + (layout == offset ? ", offset" : ""));
        c.tol = kExact;
        c.backward = false;
        cases.push_back(c);
      }
    }
  }
  for (DType from : {DType::f32, DType::bf16}) {
    for (DType to : {DType::f32, DType::bf16, DType::f64}) {
      OpCase c = make_case(
          "copy", {floats({17}, from)},
          [to](const std::vector<Tensor>& in) {
            // A broadcast source into every other column of a wider buffer.
            Tensor buffer = zeros({7, 34}, to, in[0].device());
            ops::copy_(buffer.slice(1, 0, 34, 2), in[0]);
            return std::vector<Tensor>{buffer};
          },
          Accuracy::elementwise, std::string("broadcast into a strided ") + dtype_name(to));
      c.tol = kExact;
      c.backward = false;
      cases.push_back(c);
    }
  }
  // The transposing copy (shared-memory tiles, kernels/cuda/copy.cu): tiles cut at both edges (70 =
  // 2 * 32 + 6, 45), a batch of them, a source one element into its storage; one dtype and a
  // conversion. Bit for bit the CPU's.
  for (DType from : {DType::f32, DType::bf16}) {
    for (DType to : {DType::f32, DType::bf16}) {
      for (const Shape& shape : {Shape{70, 45}, Shape{3, 33, 70}}) {
        OpCase c = make_case(
            "copy", {floats(shape, from, offset)},
            [to](const std::vector<Tensor>& in) {
              const Tensor x = in[0].transpose(-1, -2);
              Tensor out = zeros(x.shape(), to, x.device());
              ops::copy_(out, x);
              return std::vector<Tensor>{out};
            },
            Accuracy::elementwise, std::string("of a transpose to ") + dtype_name(to));
        c.tol = kExact;
        c.backward = false;
        cases.push_back(c);
      }
    }
  }
  for (DType t : {DType::f32, DType::bf16, DType::i64}) {
    OpCase c = make_case(
        "fill", {floats({1}, DType::f32).no_grad()},
        [t](const std::vector<Tensor>& in) {
          Tensor buffer = zeros({9, 13}, t, in[0].device());
          ops::fill_(buffer.slice(0, 1, 9, 2).slice(1, 3, 12), -3.25);
          return std::vector<Tensor>{buffer, full({1029}, 7.0, t, in[0].device())};
        },
        Accuracy::elementwise, std::string("strided ") + dtype_name(t));
    c.tol = kExact;
    c.backward = false;
    cases.push_back(c);
  }
  return cases;
}

// The in-place arithmetic optimizers and gradient accumulation use.
inline std::vector<OpCase> inplace_cases() {
  std::vector<OpCase> cases;
  for (DType t : {DType::f32, DType::bf16, DType::f64}) {
    OpCase add = make_case(
        "add_", {floats({33, 17}, t), floats({17}, t, strided)},
        [](const std::vector<Tensor>& in) {
          Tensor dst = ops::clone(in[0]);
          ops::add_(dst, in[1], 0.5);
          return std::vector<Tensor>{dst};
        },
        Accuracy::elementwise, "broadcast source alpha 0.5");
    add.backward = false;
    cases.push_back(add);
    OpCase add_view = make_case(
        "add_", {floats({33, 34}, t), floats({33, 17}, t, transposed)},
        [](const std::vector<Tensor>& in) {
          Tensor dst = ops::clone(in[0]);
          ops::add_(dst.slice(1, 0, 34, 2), in[1]);
          return std::vector<Tensor>{dst};
        },
        Accuracy::elementwise, "strided destination");
    add_view.backward = false;
    cases.push_back(add_view);
    OpCase scale = make_case(
        "scale_", {floats({4099}, t, offset)},
        [](const std::vector<Tensor>& in) {
          Tensor dst = ops::clone(in[0]);
          ops::scale_(dst, -1.5);
          ops::scale_(dst.slice(0, 0, 4099, 3), 0.25);
          return std::vector<Tensor>{dst};
        },
        Accuracy::elementwise);
    scale.backward = false;
    cases.push_back(scale);
  }
  return cases;
}

}  // namespace gpu_test

#endif  // BRIGADE_HAVE_CUDA
