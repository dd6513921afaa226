// Cross-backend cases: broadcasting binary ops, unary ops and their scalar forms, pow, masked_fill.
#pragma once

#if BRIGADE_HAVE_CUDA

#include <limits>

#include "op_case.h"

namespace gpu_test {

inline constexpr Layout contiguous = Layout::contiguous, transposed = Layout::transposed, strided = Layout::strided,
                        offset = Layout::offset, expanded = Layout::expanded;

// add, sub, mul, div: equal shapes, broadcasting either way, scalar-shaped operands, every layout.
inline std::vector<OpCase> binary_cases(std::mt19937_64& rng) {
  struct Op {
    const char* name;
    Tensor (*fn)(const Tensor&, const Tensor&);
  };
  const Op ops[] = {
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; }},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; }},
  };
  struct Pair {
    Shape a;
    Layout la;
    Shape b;
    Layout lb;
  };
  const int64_t r0 = random_size(rng), r1 = random_size(rng), r2 = random_size(rng, 40);
  const std::vector<Pair> pairs = {
      {{1}, contiguous, {1}, contiguous},
      {{257}, contiguous, {257}, contiguous},
      {{4099}, offset, {4099}, contiguous},  // misaligned; not a multiple of any vector width
      {{33, 17}, contiguous, {17}, contiguous},
      {{33, 1}, contiguous, {1, 17}, contiguous},
      {{3, 1, 17}, contiguous, {5, 1}, contiguous},
      {{33, 17}, transposed, {33, 17}, strided},
      {{127, 3}, contiguous, {}, contiguous},
      {{}, contiguous, {5, 7}, transposed},
      {{6, 33, 17}, expanded, {33, 17}, offset},
      {{r0, r1}, contiguous, {r1}, strided},
      // A repeated block on the contiguous loop: a bias row (whole vectors, then not), a position
      // table over a batch, the block first.
      {{33, 64}, contiguous, {64}, contiguous},
      {{33, 36}, contiguous, {1, 36}, contiguous},
      {{3, 40, 24}, contiguous, {40, 24}, contiguous},
      {{64}, contiguous, {9, 64}, contiguous},
      {{r2, r0, r1}, transposed, {r2, 1, r1}, contiguous},
  };
  std::vector<OpCase> cases;
  for (const Op& op : ops) {
    for (DType t : {DType::f32, DType::bf16, DType::f16, DType::f64}) {
      const bool all = t == DType::f32 || t == DType::bf16;
      for (size_t i = 0; i < pairs.size(); ++i) {
        if (!all && i % 3 != 0) continue;  // f16 and f64: a third of the shapes is plenty
        const Pair& p = pairs[i];
        Input b = op.name == std::string("div") ? positives(p.b, t, p.lb) : floats(p.b, t, p.lb);
        auto fn = op.fn;
        cases.push_back(make_case(op.name, {floats(p.a, t, p.la), b},
                                  [fn](const std::vector<Tensor>& x) { return std::vector<Tensor>{fn(x[0], x[1])}; },
                                  Accuracy::elementwise));
      }
    }
  }
  return cases;
}

// Unary ops with their backward kernels, the scalar forms (scale_shift) and pow.
inline std::vector<OpCase> unary_cases(std::mt19937_64& rng) {
  struct Op {
    const char* name;
    const char* detail;  // tells apart the cases of one name (pow's exponents, the scalar forms)
    Tensor (*fn)(const Tensor&);
    bool positive;  // needs inputs > 0
  };
  const Op ops[] = {
      {"neg", "", [](const Tensor& x) { return -x; }, false},
      {"exp", "", [](const Tensor& x) { return brigade::exp(x); }, false},
      {"log", "", [](const Tensor& x) { return brigade::log(x); }, true},
      {"sqrt", "", [](const Tensor& x) { return brigade::sqrt(x); }, true},
      {"rsqrt", "", [](const Tensor& x) { return brigade::rsqrt(x); }, true},
      {"tanh", "", [](const Tensor& x) { return brigade::tanh(x); }, false},
      {"relu", "", [](const Tensor& x) { return brigade::relu(x); }, false},
      {"gelu", "", [](const Tensor& x) { return brigade::gelu(x); }, false},
      {"silu", "", [](const Tensor& x) { return brigade::silu(x); }, false},
      {"sigmoid", "", [](const Tensor& x) { return brigade::sigmoid(x); }, false},
      {"pow", "exponent 2", [](const Tensor& x) { return brigade::pow(x, 2.0); }, true},
      {"pow", "exponent 3 on negatives too", [](const Tensor& x) { return brigade::pow(x, 3.0); }, false},
      {"pow", "exponent 0.5", [](const Tensor& x) { return brigade::pow(x, 0.5); }, true},
      {"pow", "exponent -1.5", [](const Tensor& x) { return brigade::pow(x, -1.5); }, true},
      {"add_scalar", "x + 2.5", [](const Tensor& x) { return x + 2.5; }, false},
      {"add_scalar", "2 - x", [](const Tensor& x) { return 2.0 - x; }, false},
      {"mul_scalar", "x times -1.5", [](const Tensor& x) { return x * -1.5; }, false},
      {"mul_scalar", "x / 4", [](const Tensor& x) { return x / 4.0; }, false},
  };
  const Shape r = {random_size(rng, 64), random_size(rng, 64)};
  const std::vector<std::pair<Shape, Layout>> shapes = {
      {{1}, contiguous},        {{3}, contiguous},      {{4099}, offset}, {{33, 17}, transposed},
      {{17, 33}, strided},      {{2, 3, 1029}, contiguous}, {{5, 9}, expanded}, {r, contiguous},
  };
  std::vector<OpCase> cases;
  for (const Op& op : ops) {
    for (DType t : {DType::f32, DType::bf16, DType::f16, DType::f64}) {
      const bool all = t == DType::f32 || t == DType::bf16;
      for (size_t i = 0; i < shapes.size(); ++i) {
        if (!all && i % 3 != 0) continue;
        const auto& [shape, layout] = shapes[i];
        Input x = op.positive ? positives(shape, t, layout) : floats(shape, t, layout);
        auto fn = op.fn;
        cases.push_back(make_case(op.name, {x},
                                  [fn](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(in[0])}; },
                                  Accuracy::elementwise, op.detail));
      }
    }
  }
  return cases;
}

// masked_fill with broadcast masks of several dtypes, and the attention pattern it exists for.
inline std::vector<OpCase> masked_fill_cases() {
  std::vector<OpCase> cases;
  for (DType t : {DType::f32, DType::bf16, DType::f16}) {
    for (DType m : {DType::i32, DType::i64, DType::f32}) {
      cases.push_back(make_case(
          "masked_fill", {floats({4, 7, 9}, t), mask({7, 9}, m)},
          [](const std::vector<Tensor>& in) { return std::vector<Tensor>{masked_fill(in[0], in[1], -1e4)}; },
          Accuracy::elementwise));
    }
    cases.push_back(make_case(
        "masked_fill", {floats({33, 17}, t, transposed), mask({33, 17})},
        [](const std::vector<Tensor>& in) { return std::vector<Tensor>{masked_fill(in[0], in[1], 0.5)}; },
        Accuracy::elementwise));
    for (int64_t T : {1, 7, 65}) {
      OpCase built = make_case(
          "causal_mask", {floats({1}, t).no_grad()},  // the input only says which device to build on
          [T](const std::vector<Tensor>& in) { return std::vector<Tensor>{causal_mask(T, in[0].device())}; },
          Accuracy::elementwise, "T " + std::to_string(T));
      built.tol = kExact;
      built.backward = false;
      if (t == DType::f32) cases.push_back(built);
      cases.push_back(make_case(
          "masked_fill", {floats({2, 3, T, T}, t)},
          [T](const std::vector<Tensor>& in) {
            const double ninf = -std::numeric_limits<double>::infinity();
            return std::vector<Tensor>{softmax(masked_fill(in[0], causal_mask(T, in[0].device()), ninf), -1)};
          },
          Accuracy::reduction, "causal attention softmax"));
    }
  }
  return cases;
}

}  // namespace gpu_test

#endif  // BRIGADE_HAVE_CUDA
