// Comparing a GPU result with its CPU reference.
//
// The score is the normalised mean squared error,
//
//     NMSE = Σ (got - want)² / Σ want²,
//
// one number that is small for rounding noise whatever the values' scale, and large when a kernel is
// wrong on a whole row, tile or edge. NMSE alone can miss one bad element among a million, so a second
// score catches that: the largest single error relative to the largest reference value. A NaN in the
// GPU result always fails — the test allocator fills fresh memory with NaN, so an output element a
// kernel forgot to write shows up here.
#pragma once

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace gpu_test {

struct Tolerance {
  double nmse;     // bound on Σ (got - want)² / Σ want²
  double max_rel;  // bound on max |got - want| / max |want|
};

// How far a GPU kernel may drift from the CPU reference. Both compute 16-bit types in f32 and round
// once, so most differences come from summation order (reductions, GEMMs) and from 1-ulp differences
// in exp/tanh that then round to different 16-bit neighbours.
enum class Accuracy {
  elementwise,  // one rounding per element
  reduction,    // sums, norms, softmax, losses: summation order differs
  gemm,         // long dot products (matmul, conv)
};

inline Tolerance tolerance(Accuracy kind, brigade::DType dtype) {
  using brigade::DType;
  switch (dtype) {
    case DType::f32:
      if (kind == Accuracy::elementwise) return {1e-7, 1e-4};
      if (kind == Accuracy::reduction) return {1e-5, 1e-3};
      return {5e-5, 3e-3};
    case DType::bf16:
      if (kind == Accuracy::elementwise) return {1e-4, 3e-2};
      if (kind == Accuracy::reduction) return {1e-3, 6e-2};
      return {5e-3, 6e-2};
    case DType::f16:
      if (kind == Accuracy::elementwise) return {1e-6, 4e-3};
      if (kind == Accuracy::reduction) return {1e-4, 1e-2};
      return {5e-4, 1e-2};
    case DType::f64:
      return {1e-16, 1e-7};
    default:  // integer results (indices, masks) must match exactly
      return {0.0, 0.0};
  }
}

struct Comparison {
  double nmse = 0;
  double max_rel = 0;
  std::string problem;  // empty when both scores could be computed; else what went wrong (a NaN, ...)
  std::string worst;    // "element 17: got 1.5, want 1.25" — where the largest error is
};

// Scores `got` (the GPU result, in row-major order) against `want` (the CPU reference).
inline Comparison compare(const std::vector<double>& got, const std::vector<double>& want) {
  Comparison c;
  if (got.size() != want.size()) {
    c.problem = "sizes differ: " + std::to_string(got.size()) + " vs " + std::to_string(want.size());
    return c;
  }
  double err2 = 0, ref2 = 0, max_err = 0, max_ref = 0;
  size_t worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    if (std::isnan(g) && !std::isnan(w)) {
      c.problem = "NaN at element " + std::to_string(i) + " (the reference is " + std::to_string(w) +
                  "): an unwritten output element or a bad computation";
      return c;
    }
    if (g == w || (std::isnan(g) && std::isnan(w))) continue;  // equal, including equal infinities
    if (!std::isfinite(g) || !std::isfinite(w)) {
      std::ostringstream os;
      os << "element " << i << ": got " << g << ", want " << w;
      c.problem = os.str();
      return c;
    }
    const double d = std::abs(g - w);
    err2 += d * d;
    if (d > max_err) max_err = d, worst = i;
  }
  for (double w : want)
    if (std::isfinite(w)) ref2 += w * w, max_ref = std::max(max_ref, std::abs(w));
  // An all-zero reference has no scale: the errors are then absolute.
  c.nmse = ref2 > 0 ? err2 / ref2 : err2;
  c.max_rel = max_ref > 0 ? max_err / max_ref : max_err;
  if (max_err > 0) {
    std::ostringstream os;
    os.precision(9);
    os << "element " << worst << ": got " << got[worst] << ", want " << want[worst];
    c.worst = os.str();
  }
  return c;
}

// Whether `c` is within `tol`; otherwise `why` says by how much it is not.
inline bool within(const Comparison& c, Tolerance tol, std::string& why) {
  std::ostringstream os;
  if (!c.problem.empty()) {
    os << c.problem;
  } else if (c.nmse > tol.nmse || c.max_rel > tol.max_rel) {
    os << "NMSE " << c.nmse << " (limit " << tol.nmse << "), max error / max |reference| " << c.max_rel
       << " (limit " << tol.max_rel << "); worst " << c.worst;
  } else {
    return true;
  }
  why = os.str();
  return false;
}

}  // namespace gpu_test
