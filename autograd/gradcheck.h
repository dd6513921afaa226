// gradcheck: compares the tape's gradients with central finite differences, in f64.
//
// For f: inputs -> output, it draws a fixed random cotangent u (shape of the output), so the scalar
// L = <u, f(x)> has gradient dL/dx = J^T u. The tape computes that in one backward pass; the check
// recomputes each component as (L(x + eps e_i) - L(x - eps e_i)) / 2 eps and requires
//   |analytic - numeric| <= atol + rtol * |numeric|
// for every element of every input that requires grad (PyTorch's gradcheck defaults).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace brigade {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
  uint64_t seed = 1234;  // for the random cotangent
};

struct GradcheckResult {
  bool ok = false;
  std::string message;  // on failure: which input and element, analytic vs numeric
  explicit operator bool() const { return ok; }
};

// Inputs must be f64; those that should be checked must require grad. f must be deterministic.
GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options = {});

}  // namespace brigade
