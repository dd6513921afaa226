// gemm_agreement.h's bound and comparison. The host side is plain loops over m x n x batch values:
// it runs once per problem key, beside GEMMs that cost k times more.
#include "kernels/cuda/gemm_agreement.h"

#include <cmath>
#include <limits>
#include <sstream>

namespace brigade::cuda {
namespace {

double unit_roundoff(DType t) {
  switch (t) {
    case DType::bf16: return std::ldexp(1.0, -8);
    case DType::f16: return std::ldexp(1.0, -11);
    case DType::f64: return std::ldexp(1.0, -53);
    default: return std::ldexp(1.0, -24);
  }
}

double smallest_normal(DType t) {
  switch (t) {
    case DType::f16: return std::ldexp(1.0, -14);
    case DType::f64: return std::numeric_limits<double>::min();
    default: return std::numeric_limits<float>::min();  // f32 and bf16 share the exponent range
  }
}

// |x| in f32, any strides in, contiguous out: relu(x) + relu(-x), which is exact (one term is 0).
Tensor abs_f32(const Tensor& x) {
  const Tensor f = ops::to_dtype(x, DType::f32);
  return ops::binary(ops::BinaryOp::add, ops::unary(ops::UnaryOp::relu, f),
                     ops::unary(ops::UnaryOp::relu, ops::unary(ops::UnaryOp::neg, f)));
}

bool agree(double got, double want, double bound) {
  if (got == want || (std::isnan(got) && std::isnan(want))) return true;
  return std::abs(got - want) <= bound;  // false for a NaN or infinite difference
}

struct Worst {
  double ratio = 0;  // |difference| / bound of the worst element so far
  size_t index = 0;
  double got = 0, want = 0, bound = 0;
  const char* which = "out";
};

void compare(const std::vector<double>& got, const std::vector<double>& want, const std::vector<double>& bound,
             const char* which, Worst& worst) {
  for (size_t i = 0; i < got.size(); ++i) {
    if (agree(got[i], want[i], bound[i])) continue;
    const double diff = std::abs(got[i] - want[i]);
    const double ratio = std::isnan(diff) ? std::numeric_limits<double>::infinity() : diff / bound[i];
    if (worst.ratio == 0 || ratio > worst.ratio) worst = {ratio, i, got[i], want[i], bound[i], which};
  }
}

}  // namespace

GemmReference gemm_reference(const GemmCall& call) {
  GemmReference ref;
  ref.out = call.out.to_vector();
  if (call.pre.defined()) ref.pre = call.pre.to_vector();

  const Tensor magnitude = empty(call.out.shape(), DType::f32, call.out.device());
  run_gemm(GemmCall{magnitude, abs_f32(call.a), abs_f32(call.b), Tensor(), Tensor(), Activation::none},
           ops::MatmulBackend::cublas);
  ref.bound = magnitude.to_vector();
  std::vector<double> bias;
  if (call.bias.defined()) bias = call.bias.to_vector();

  const double k = double(call.a.size(-1));
  const double accumulation = 4 * k * unit_roundoff(call.out.dtype() == DType::f64 ? DType::f64 : DType::f32);
  const double rounding = 8 * unit_roundoff(call.out.dtype());
  const double floor = 2 * smallest_normal(call.out.dtype());
  // |pre-activation|: the kept pre, or out itself without an activation; for GELU with no pre kept,
  // S + |bias| bounds it.
  const std::vector<double>* pre = !ref.pre.empty() ? &ref.pre : call.act == Activation::none ? &ref.out : nullptr;
  const size_t n = size_t(call.out.size(-1));
  for (size_t i = 0; i < ref.bound.size(); ++i) {
    const double sum_abs = ref.bound[i], b = bias.empty() ? 0.0 : std::abs(bias[i % n]);
    const double p = pre ? std::abs((*pre)[i]) : sum_abs + b;
    ref.bound[i] = accumulation * sum_abs + rounding * (p + b) + floor;
  }
  return ref;
}

std::string gemm_disagreement(const GemmReference& ref, const GemmCall& call) {
  Worst worst;
  compare(call.out.to_vector(), ref.out, ref.bound, "out", worst);
  if (call.pre.defined()) compare(call.pre.to_vector(), ref.pre, ref.bound, "pre", worst);
  if (worst.ratio == 0) return {};
  const int64_t n = call.out.size(-1), m = call.out.size(-2);
  const int64_t index = int64_t(worst.index);
  std::ostringstream line;
  line << "worst difference " << std::abs(worst.got - worst.want) << " at " << worst.which << "[";
  if (call.out.dim() > 2) line << "batch " << index / (m * n) << ", ";
  line << "row " << index / n % m << ", col " << index % n << "]: " << worst.got << " vs cuBLAS's " << worst.want
       << " (bound " << worst.bound << ")";
  return line.str();
}

}  // namespace brigade::cuda
