// gemm_agreement.h's synthetic operands and exact comparison. The comparison runs on the host, once
// per problem key, over every element of the output: one device-to-host copy each, converted by the
// CPU kernels and read as raw arrays (Tensor::to_vector's element-by-element reads would take seconds
// for a large GEMM).
#include "kernels/cuda/gemm_agreement.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "core/cuda/check.h"
#include "core/cuda/current.h"

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

// A fixed, well-mixed integer in [−range, range] for storage element i (splitmix64's finaliser):
// no period that a tile size could line up with.
int small_integer(uint64_t i, int range) {
  uint64_t z = i + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return int(z % uint64_t(2 * range + 1)) - range;
}

// A tensor like x — same shape, strides, and offset modulo 128 elements (so the same alignment of
// every row and batch entry for any dtype) — on storage of its own holding small integers. The
// storage spans exactly the elements x's view can reach: a broadcast dim (stride 0) takes no room.
Tensor synthetic_like(const Tensor& x, int range, uint64_t seed) {
  const int64_t offset = x.offset() % 128;
  int64_t extent = offset + 1;
  for (int64_t d = 0; d < x.dim(); ++d) extent += (x.size(d) - 1) * x.stride(d);
  const Tensor host = empty({extent}, DType::f32, Device::cpu());
  float* v = host.data<float>();
  for (int64_t i = 0; i < extent; ++i) v[i] = float(small_integer(uint64_t(i) + seed, range));
  const Tensor storage = ops::to_dtype(host, x.dtype()).to(x.device());
  return make_view(storage, x.shape(), x.strides(), offset);
}

struct Worst {
  double ratio = 0;  // |difference| / bound of the worst element so far; 0: none disagrees
  int64_t index = 0;
  double got = 0, want = 0, bound = 0;
  const char* which = "out";
};

void note(Worst& worst, double ratio, int64_t i, double got, double want, double bound, const char* which) {
  if (worst.ratio == 0 || ratio > worst.ratio) worst = {ratio, i, got, want, bound, which};
}

// got must equal want (by value; a NaN equals nothing).
template <class T>
void compare_exact(const Tensor& got, const Tensor& want, const char* which, Worst& worst) {
  const T *g = got.data<T>(), *w = want.data<T>();
  for (int64_t i = 0; i < got.numel(); ++i)
    if (!(g[i] == w[i])) {
      const double diff = std::abs(double(g[i]) - double(w[i]));
      note(worst, std::isnan(diff) ? std::numeric_limits<double>::infinity() : 1 + diff, i, g[i], w[i], 0, which);
    }
}

// got within gemm_agreement.h's GELU bound of want, given the exact pre-activation.
template <class T>
void compare_gelu(const Tensor& got, const Tensor& want, const Tensor& pre, DType out, Worst& worst) {
  const T *g = got.data<T>(), *w = want.data<T>(), *p = pre.data<T>();
  const double u = unit_roundoff(out), floor = 2 * smallest_normal(out);
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double bound = 8 * u * std::abs(double(w[i])) + 4 * u * std::abs(double(p[i])) + floor;
    const double diff = std::abs(double(g[i]) - double(w[i]));
    if (diff <= bound) continue;  // false for a NaN difference
    note(worst, std::isnan(diff) ? std::numeric_limits<double>::infinity() : diff / bound, i, g[i], w[i], bound,
         "out");
  }
}

// ref.product with its bias: the product already rounded to out's dtype, + bias in the wide dtype
// (exact: small integers), rounded again by the caller.
template <class T>
void add_bias(Tensor& product, const Tensor& bias, int64_t n) {
  T* p = product.data<T>();
  const T* b = bias.data<T>();
  for (int64_t i = 0; i < product.numel(); ++i) p[i] += b[i % n];
}

}  // namespace

GemmCall synthetic_call(const GemmCall& call) {
  const int range = call.a.size(-1) <= (int64_t(1) << 18) ? 2 : 1;  // |sum| ≤ range² k ≤ 2²⁰
  GemmCall s;
  s.a = synthetic_like(call.a, range, 0);
  s.b = synthetic_like(call.b, range, uint64_t(1) << 40);
  if (call.bias.defined()) s.bias = synthetic_like(call.bias, 2, uint64_t(1) << 41);
  s.act = call.act;
  s.out = empty(call.out.shape(), call.out.dtype(), call.out.device());
  if (call.pre.defined() || call.act != Activation::none)
    s.pre = empty(call.out.shape(), call.out.dtype(), call.out.device());
  return s;
}

void fill_nan(const GemmCall& call) {
  // All bits set is a NaN in f32, f64, bf16 and f16 alike.
  for (const Tensor* t : {&call.out, &call.pre})
    if (t->defined()) BRIGADE_CUDA_CHECK(cudaMemsetAsync(t->raw_data(), 0xFF, t->nbytes(), stream_for(*t)));
}

GemmReference gemm_reference(const GemmCall& synthetic) {
  const GemmCall& c = synthetic;
  const DType t = wide(c.out.dtype());
  const Tensor exact = empty(c.out.shape(), t, c.out.device());
  run_gemm(GemmCall{exact, c.a, c.b, Tensor(), Tensor(), Activation::none}, ops::MatmulBackend::cublas);
  GemmReference ref;
  // Rounded where the separate matmul and add ops round (kernels/cuda/epilogue.cuh): the product to
  // out's dtype, then the sum with the bias once more.
  const auto round_to_out = [&](const Tensor& x) { return ops::to_dtype(ops::to_dtype(x, c.out.dtype()), t); };
  ref.product = round_to_out(host_copy(exact, t));
  if (c.bias.defined()) {
    const Tensor bias = host_copy(c.bias, t);
    if (t == DType::f64) add_bias<double>(ref.product, bias, c.out.size(-1));
    else add_bias<float>(ref.product, bias, c.out.size(-1));
    ref.product = round_to_out(ref.product);
  }
  if (c.act != Activation::none) ref.out = host_copy(c.out, t);
  return ref;
}

std::string gemm_disagreement(const GemmReference& ref, const GemmCall& synthetic) {
  const GemmCall& c = synthetic;
  const DType t = wide(c.out.dtype());
  Worst worst;
  const bool activated = c.act != Activation::none;
  const Tensor product = host_copy(activated ? c.pre : c.out, t);
  if (t == DType::f64) compare_exact<double>(product, ref.product, activated ? "pre" : "out", worst);
  else compare_exact<float>(product, ref.product, activated ? "pre" : "out", worst);
  if (activated) {
    const Tensor out = host_copy(c.out, t);
    if (t == DType::f64) compare_gelu<double>(out, ref.out, ref.product, c.out.dtype(), worst);
    else compare_gelu<float>(out, ref.out, ref.product, c.out.dtype(), worst);
  }
  if (worst.ratio == 0) return {};
  const int64_t n = c.out.size(-1), m = c.out.size(-2);
  std::ostringstream line;
  line << "on synthetic operands, worst difference " << std::abs(worst.got - worst.want) << " at " << worst.which
       << "[";
  if (c.out.dim() > 2) line << "batch " << worst.index / (m * n) << ", ";
  line << "row " << worst.index / n % m << ", col " << worst.index % n << "]: " << worst.got << " vs "
       << worst.want;
  if (worst.bound > 0) line << " (bound " << worst.bound << ")";
  else line << " (must be equal)";
  return line.str();
}

}  // namespace brigade::cuda
