#include "autograd/gradcheck.h"

#include <cmath>
#include <sstream>

#include "autograd/functions.h"
#include "autograd/tape.h"
#include "core/rng.h"
#include "kernels/ops.h"

namespace brigade {
namespace {

// Storage offsets (in elements) of every element of t, in row-major order: lets the check perturb
// non-contiguous inputs in place, through their strides.
std::vector<int64_t> element_offsets(const Tensor& t) {
  std::vector<int64_t> out;
  std::vector<int64_t> idx(size_t(t.dim()), 0);
  for (int64_t n = 0; n < t.numel(); ++n) {
    int64_t off = t.offset();
    for (size_t i = 0; i < idx.size(); ++i) off += idx[i] * t.strides()[i];
    out.push_back(off);
    for (size_t i = idx.size(); i-- > 0;) {
      if (++idx[i] < t.shape()[i]) break;
      idx[i] = 0;
    }
  }
  return out;
}

double dot(const Tensor& a, const Tensor& b) {
  std::vector<double> va = a.to_vector(), vb = b.to_vector();
  double s = 0;
  for (size_t i = 0; i < va.size(); ++i) s += va[i] * vb[i];
  return s;
}

}  // namespace

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options) {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].defined() && inputs[i].requires_grad())
      BRIGADE_CHECK(inputs[i].dtype() == DType::f64 && inputs[i].device().is_cpu(), "gradcheck: input ", i,
                    " must be a f64 cpu tensor, got ", dtype_name(inputs[i].dtype()), " on ", inputs[i].device().str());

  // Analytic: one backward pass with cotangent u.
  for (const Tensor& x : inputs)
    if (x.defined() && x.requires_grad()) x.impl().grad.reset();
  Tensor u;
  {
    Tape tape;
    Tensor out;
    {
      TapeGuard guard(tape);
      out = f(inputs);
    }
    BRIGADE_CHECK(out.defined() && out.dtype() == DType::f64, "gradcheck: f must return a f64 tensor");
    Generator gen(options.seed);
    u = randn(out.shape(), DType::f64, Device::cpu(), &gen);
    if (out.requires_grad()) tape.backward({out}, {u});
  }

  // Numeric: central differences of L = <u, f(x)>, one element at a time.
  NoGradGuard no_grad;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    if (!x.defined() || !x.requires_grad()) continue;
    Tensor analytic = x.grad();
    std::vector<double> a = analytic.defined() ? analytic.to_vector() : std::vector<double>(size_t(x.numel()), 0.0);
    double* base = static_cast<double*>(x.storage().data());
    std::vector<int64_t> offsets = element_offsets(x);
    for (size_t e = 0; e < offsets.size(); ++e) {
      double saved = base[offsets[e]];
      base[offsets[e]] = saved + options.eps;
      double plus = dot(u, f(inputs));
      base[offsets[e]] = saved - options.eps;
      double minus = dot(u, f(inputs));
      base[offsets[e]] = saved;
      double numeric = (plus - minus) / (2 * options.eps);
      if (!(std::abs(a[e] - numeric) <= options.atol + options.rtol * std::abs(numeric))) {
        std::ostringstream os;
        os << "gradcheck: input " << i << " (shape " << shape_str(x.shape()) << "), element " << e
           << ": analytic gradient " << a[e] << " but finite differences give " << numeric;
        return {false, os.str()};
      }
    }
  }
  return {true, "ok"};
}

}  // namespace brigade
