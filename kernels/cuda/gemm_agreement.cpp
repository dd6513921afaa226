// gemm_agreement.h's bound and comparison. They run on the host, once per problem key, over every
// element of the output: one device-to-host copy each, converted by the CPU kernels and read as raw
// arrays (Tensor::to_vector's element-by-element reads would take seconds for a large GEMM).
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

// The host dtype a call's values are compared in: exact for every output dtype.
DType wide(DType t) { return t == DType::f64 ? DType::f64 : DType::f32; }

// x on the host, contiguous, in `dtype`.
Tensor host_copy(const Tensor& x, DType dtype) {
  return ops::contiguous(ops::to_dtype(x.detach().to(Device::cpu()), dtype));
}

// |x| in f32, any strides in, contiguous out: relu(x) + relu(-x), which is exact (one term is 0).
Tensor abs_f32(const Tensor& x) {
  const Tensor f = ops::to_dtype(x, DType::f32);
  return ops::binary(ops::BinaryOp::add, ops::unary(ops::UnaryOp::relu, f),
                     ops::unary(ops::UnaryOp::relu, ops::unary(ops::UnaryOp::neg, f)));
}

struct Worst {
  double ratio = 0;  // |difference| / bound of the worst element so far; 0: none disagrees
  int64_t index = 0;
  double got = 0, want = 0, bound = 0;
  const char* which = "out";
};

template <class T>
void compare(const Tensor& got, const Tensor& want, const Tensor& bound, const char* which, Worst& worst) {
  const T *g = got.data<T>(), *w = want.data<T>(), *b = bound.data<T>();
  for (int64_t i = 0; i < got.numel(); ++i) {
    if (g[i] == w[i] || (std::isnan(g[i]) && std::isnan(w[i]))) continue;
    const double diff = std::abs(double(g[i]) - double(w[i]));
    if (diff <= b[i]) continue;  // false for a NaN or infinite difference
    const double ratio = std::isnan(diff) ? std::numeric_limits<double>::infinity() : diff / b[i];
    if (worst.ratio == 0 || ratio > worst.ratio) worst = {ratio, i, double(g[i]), double(w[i]), double(b[i]), which};
  }
}

template <class T>
void fill_bound(GemmReference& ref, const GemmCall& call, const Tensor& bias) {
  const double k = double(call.a.size(-1));
  const double accumulation = 4 * k * unit_roundoff(wide(call.out.dtype()));
  const double rounding = 8 * unit_roundoff(call.out.dtype());
  const double floor = 2 * smallest_normal(call.out.dtype());
  // |pre-activation|: the kept pre, or out itself without an activation; for GELU with no pre kept,
  // S + |bias| bounds it.
  const Tensor& pre = ref.pre.defined() ? ref.pre : call.act == Activation::none ? ref.out : Tensor();
  const T* p = pre.defined() ? pre.data<T>() : nullptr;
  const T* bias_v = bias.defined() ? bias.data<T>() : nullptr;
  T* s = ref.bound.data<T>();  // holds S on entry
  const int64_t n = call.out.size(-1);
  for (int64_t i = 0; i < ref.bound.numel(); ++i) {
    const double sum_abs = s[i], b = bias_v ? std::abs(double(bias_v[i % n])) : 0.0;
    const double magnitude = p ? std::abs(double(p[i])) : sum_abs + b;
    s[i] = T(accumulation * sum_abs + rounding * (magnitude + b) + floor);
  }
}

}  // namespace

GemmReference gemm_reference(const GemmCall& call) {
  const DType t = wide(call.out.dtype());
  GemmReference ref;
  ref.out = host_copy(call.out, t);
  if (call.pre.defined()) ref.pre = host_copy(call.pre, t);
  const Tensor magnitude = empty(call.out.shape(), DType::f32, call.out.device());
  run_gemm(GemmCall{magnitude, abs_f32(call.a), abs_f32(call.b), Tensor(), Tensor(), Activation::none},
           ops::MatmulBackend::cublas);
  ref.bound = host_copy(magnitude, t);
  const Tensor bias = call.bias.defined() ? host_copy(call.bias, t) : Tensor();
  if (t == DType::f64) fill_bound<double>(ref, call, bias);
  else fill_bound<float>(ref, call, bias);
  return ref;
}

std::string gemm_disagreement(const GemmReference& ref, const GemmCall& call) {
  const DType t = wide(call.out.dtype());
  Worst worst;
  auto check = [&](const Tensor& got, const Tensor& want, const char* which) {
    const Tensor host = host_copy(got, t);
    if (t == DType::f64) compare<double>(host, want, ref.bound, which, worst);
    else compare<float>(host, want, ref.bound, which, worst);
  };
  check(call.out, ref.out, "out");
  if (call.pre.defined()) check(call.pre, ref.pre, "pre");
  if (worst.ratio == 0) return {};
  const int64_t n = call.out.size(-1), m = call.out.size(-2);
  std::ostringstream line;
  line << "worst difference " << std::abs(worst.got - worst.want) << " at " << worst.which << "[";
  if (call.out.dim() > 2) line << "batch " << worst.index / (m * n) << ", ";
  line << "row " << worst.index / n % m << ", col " << worst.index % n << "]: " << worst.got << " vs cuBLAS's "
       << worst.want << " (bound " << worst.bound << ")";
  return line.str();
}

}  // namespace brigade::cuda
