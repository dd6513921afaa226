// Helpers shared by the tests: random inputs, non-contiguous copies, and comparison against f64
// reference values computed independently in the test.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "brigade.h"
#include "kernels/ops.h"  // the tests check the raw kernels too

namespace test {

using namespace brigade;

// Fresh random normal values (a fixed seed per call site keeps failures reproducible).
inline Tensor random(const Shape& shape, uint64_t seed, DType dtype = DType::f64, double scale = 1.0) {
  Generator gen(seed);
  Tensor t = randn(shape, DType::f64, Device::cpu(), &gen);
  if (scale != 1.0) t = ops::scale_shift(t, scale, 0.0);
  return ops::to_dtype(t, dtype);
}

// The same values laid out differently, so kernels see non-contiguous inputs:
//  - strided(): every other element of a buffer twice as wide (a slice with step 2 on the last dim);
//  - transposed(): stored with the last two dims swapped, viewed back through a transpose.
inline Tensor strided(const Tensor& t) {
  if (t.dim() == 0) return t;
  Shape wide = t.shape();
  wide.back() *= 2;
  Tensor buffer = zeros(wide, t.dtype());
  Tensor view = buffer.slice(-1, 0, wide.back(), 2);
  ops::copy_(view, t);
  REQUIRE(!view.is_contiguous());
  return view;
}

inline Tensor transposed(const Tensor& t) {
  REQUIRE(t.dim() >= 2);
  Tensor stored = ops::contiguous(t.transpose(-1, -2));
  Tensor view = stored.transpose(-1, -2);
  return view;
}

// A leaf copy of t that requires grad (for gradcheck and tape tests).
inline Tensor leaf(const Tensor& t) {
  Tensor out = ops::clone(t);
  out.requires_grad_(true);
  return out;
}

// A leaf whose storage is not contiguous (gradcheck then perturbs it through its strides).
inline Tensor strided_leaf(const Tensor& t) {
  Tensor x = strided(t);
  x.requires_grad_(true);
  return x;
}

// gradcheck as a test assertion, with its message on failure.
inline void require_gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                              const std::vector<Tensor>& inputs) {
  GradcheckResult r = gradcheck(f, inputs);
  INFO(r.message);
  REQUIRE(r.ok);
}

// An f32 value rounded to bf16/f16 by the types' own constructors, back as double.
inline double round_to(DType dtype, float v) {
  return dtype == DType::bf16 ? double(float(bf16(v))) : double(float(f16(v)));
}

// Checks got == expected elementwise within atol + rtol * |expected|; reports the first mismatch.
inline void require_close(const Tensor& got, const std::vector<double>& expected, double atol = 1e-6,
                          double rtol = 1e-6) {
  std::vector<double> g = got.to_vector();
  REQUIRE(g.size() == expected.size());
  for (size_t i = 0; i < g.size(); ++i) {
    bool ok = std::abs(g[i] - expected[i]) <= atol + rtol * std::abs(expected[i]);
    if (!ok) {
      std::ostringstream os;
      os << "element " << i << ": got " << g[i] << ", expected " << expected[i];
      FAIL(os.str());
    }
  }
}

inline void require_close(const Tensor& got, const Tensor& expected, double atol = 1e-6, double rtol = 1e-6) {
  REQUIRE(got.shape() == expected.shape());
  require_close(got, expected.to_vector(), atol, rtol);
}

// Bitwise equality of values: floats through f64 (exact for every float dtype), integers as i64
// (f64 would lose i64 values above 2^53).
inline void require_equal(const Tensor& got, const Tensor& expected) {
  REQUIRE(got.shape() == expected.shape());
  REQUIRE(got.dtype() == expected.dtype());
  if (is_integral(got.dtype())) {
    Tensor g = ops::to_dtype(ops::contiguous(got), DType::i64), e = ops::to_dtype(ops::contiguous(expected), DType::i64);
    REQUIRE(std::equal(g.data<int64_t>(), g.data<int64_t>() + g.numel(), e.data<int64_t>()));
  } else {
    REQUIRE(got.to_vector() == expected.to_vector());
  }
}

// Two checkpoint files hold the same step and, bit for bit, the same model and optimizer tensors.
inline void require_same_checkpoint(const std::string& got_path, const std::string& expected_path) {
  INFO(got_path << " vs " << expected_path);
  nn::Checkpoint got = nn::load_checkpoint(got_path), expected = nn::load_checkpoint(expected_path);
  REQUIRE(got.metadata.at("step") == expected.metadata.at("step"));
  auto require_same = [](const std::map<std::string, Tensor>& a, const std::map<std::string, Tensor>& b) {
    REQUIRE(a.size() == b.size());
    for (auto& [name, tensor] : b) {
      INFO(name);
      REQUIRE(a.count(name) == 1);
      test::require_equal(a.at(name), tensor);
    }
  };
  require_same(got.model, expected.model);
  require_same(got.optimizer, expected.optimizer);
}

// Row-major flat index helpers for writing f64 references as plain loops: the index of each dim
// for flat position `flat` of `shape`, and back.
inline std::vector<int64_t> unravel(int64_t flat, const Shape& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return idx;
}

inline int64_t ravel(const std::vector<int64_t>& idx, const Shape& shape) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + idx[d];
  return flat;
}

// A tensor's values as f64, for comparing with such references.
inline std::vector<double> values(const Tensor& t) { return t.to_vector(); }

// The message of the brigade::Error that `f` throws, or "(no error)".
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// The line of step `step` in a pipeline rank x step grid (pipeline/analysis/grid.h) printed inside an error
// message, e.g. "   5  !sendA2>1  !sendG0>0".
inline std::string grid_line(const std::string& message, int step) {
  std::istringstream lines(message);
  const std::string number = std::to_string(step);
  for (std::string line; std::getline(lines, line);) {
    const size_t first = line.find_first_not_of(' ');
    if (first != std::string::npos && line.compare(first, number.size() + 2, number + "  ") == 0) return line;
  }
  return "(no line for step " + number + ")";
}

}  // namespace test
