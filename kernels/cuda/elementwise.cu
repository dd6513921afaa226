// CUDA kernels: elementwise ops. Each op's math is a small functor of compute values (the same
// formulas as kernels/cpu/elementwise.cpp); the loops are elementwise_map.cuh's map. The op is
// chosen on the host, so each (op, dtype) pair is its own kernel with no switch inside the loop.
#include <cstring>

#include "kernels/cuda/kernels.h"
#include "kernels/cuda/activation.cuh"
#include "kernels/cuda/elementwise_map.cuh"

namespace brigade::cuda {
namespace {

// ---- the scalar math (C is float or double): kernels/cuda/activation.cuh ----

// Functors: one per op, templated on the compute type through their call operator.
#define BRIGADE_FUNCTOR(Name, params, expr) \
  struct Name {                             \
    template <class C>                      \
    __device__ __forceinline__ C operator() params const { return expr; } \
  }

BRIGADE_FUNCTOR(Add, (C x, C y), x + y);
BRIGADE_FUNCTOR(Sub, (C x, C y), x - y);
BRIGADE_FUNCTOR(Mul, (C x, C y), x * y);
BRIGADE_FUNCTOR(Div, (C x, C y), x / y);

BRIGADE_FUNCTOR(Neg, (C x), -x);
BRIGADE_FUNCTOR(Exp, (C x), dev_exp(x));
BRIGADE_FUNCTOR(Log, (C x), dev_log(x));
BRIGADE_FUNCTOR(Sqrt, (C x), dev_sqrt(x));
BRIGADE_FUNCTOR(Rsqrt, (C x), C(1) / dev_sqrt(x));  // not rsqrtf: the CPU divides, and so do we
BRIGADE_FUNCTOR(Tanh, (C x), dev_tanh(x));
BRIGADE_FUNCTOR(Relu, (C x), x > C(0) ? x : C(0));
BRIGADE_FUNCTOR(Gelu, (C x), gelu(x));
BRIGADE_FUNCTOR(Silu, (C x), x * sigmoid(x));
BRIGADE_FUNCTOR(Sigmoid, (C x), sigmoid(x));

// Backward functors take (grad_y, x, y) and use whichever of x and y = op(x) is cheaper.
BRIGADE_FUNCTOR(NegBackward, (C g, C, C), -g);
BRIGADE_FUNCTOR(ExpBackward, (C g, C, C y), g * y);
BRIGADE_FUNCTOR(LogBackward, (C g, C x, C), g / x);
BRIGADE_FUNCTOR(SqrtBackward, (C g, C, C y), g * C(0.5) / y);
BRIGADE_FUNCTOR(RsqrtBackward, (C g, C, C y), g * C(-0.5) * y * y * y);
BRIGADE_FUNCTOR(TanhBackward, (C g, C, C y), g * (C(1) - y * y));
BRIGADE_FUNCTOR(ReluBackward, (C g, C x, C), x > C(0) ? g : C(0));
BRIGADE_FUNCTOR(GeluBackward, (C g, C x, C), g * gelu_derivative(x));
BRIGADE_FUNCTOR(SiluBackward, (C g, C x, C), g * silu_derivative(x));
BRIGADE_FUNCTOR(SigmoidBackward, (C g, C, C y), g * y * (C(1) - y));

#undef BRIGADE_FUNCTOR

// Functors with a parameter carry it as a double and narrow it to the compute type, as the CPU's
// T(scale) does.
struct ScaleShift {
  double scale, shift;
  template <class C> __device__ __forceinline__ C operator()(C x) const { return x * C(scale) + C(shift); }
};
struct Pow {
  double exponent;
  template <class C> __device__ __forceinline__ C operator()(C x) const { return dev_pow(x, C(exponent)); }
};
struct PowBackward {
  double exponent;
  template <class C> __device__ __forceinline__ C operator()(C g, C x) const {
    // x^0 is constant: gradient 0 everywhere, also at x = 0 where e * x^(e-1) would be 0 * inf.
    if (exponent == 0) return C(0);
    return g * C(exponent) * dev_pow(x, C(exponent) - C(1));
  }
};
struct AddScaled {
  double alpha;
  template <class C> __device__ __forceinline__ C operator()(C d, C s) const { return d + C(alpha) * s; }
};

template <class T>
void binary_typed(ops::BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  const char* name = ops::binary_op_name(op);
  switch (op) {
    case ops::BinaryOp::add: return map<T, T, T>(name, Add{}, out, a, b);
    case ops::BinaryOp::sub: return map<T, T, T>(name, Sub{}, out, a, b);
    case ops::BinaryOp::mul: return map<T, T, T>(name, Mul{}, out, a, b);
    case ops::BinaryOp::div: return map<T, T, T>(name, Div{}, out, a, b);
  }
}

template <class T>
void unary_typed(ops::UnaryOp op, const Tensor& out, const Tensor& x) {
  const char* name = ops::unary_op_name(op);
  switch (op) {
    case ops::UnaryOp::neg: return map<T, T>(name, Neg{}, out, x);
    case ops::UnaryOp::exp: return map<T, T>(name, Exp{}, out, x);
    case ops::UnaryOp::log: return map<T, T>(name, Log{}, out, x);
    case ops::UnaryOp::sqrt: return map<T, T>(name, Sqrt{}, out, x);
    case ops::UnaryOp::rsqrt: return map<T, T>(name, Rsqrt{}, out, x);
    case ops::UnaryOp::tanh: return map<T, T>(name, Tanh{}, out, x);
    case ops::UnaryOp::relu: return map<T, T>(name, Relu{}, out, x);
    case ops::UnaryOp::gelu: return map<T, T>(name, Gelu{}, out, x);
    case ops::UnaryOp::silu: return map<T, T>(name, Silu{}, out, x);
    case ops::UnaryOp::sigmoid: return map<T, T>(name, Sigmoid{}, out, x);
  }
}

template <class T>
void unary_backward_typed(ops::UnaryOp op, const Tensor& gx, const Tensor& gy, const Tensor& x, const Tensor& y) {
  const char* name = ops::unary_op_name(op);
  switch (op) {
    case ops::UnaryOp::neg: return map<T, T, T, T>(name, NegBackward{}, gx, gy, x, y);
    case ops::UnaryOp::exp: return map<T, T, T, T>(name, ExpBackward{}, gx, gy, x, y);
    case ops::UnaryOp::log: return map<T, T, T, T>(name, LogBackward{}, gx, gy, x, y);
    case ops::UnaryOp::sqrt: return map<T, T, T, T>(name, SqrtBackward{}, gx, gy, x, y);
    case ops::UnaryOp::rsqrt: return map<T, T, T, T>(name, RsqrtBackward{}, gx, gy, x, y);
    case ops::UnaryOp::tanh: return map<T, T, T, T>(name, TanhBackward{}, gx, gy, x, y);
    case ops::UnaryOp::relu: return map<T, T, T, T>(name, ReluBackward{}, gx, gy, x, y);
    case ops::UnaryOp::gelu: return map<T, T, T, T>(name, GeluBackward{}, gx, gy, x, y);
    case ops::UnaryOp::silu: return map<T, T, T, T>(name, SiluBackward{}, gx, gy, x, y);
    case ops::UnaryOp::sigmoid: return map<T, T, T, T>(name, SigmoidBackward{}, gx, gy, x, y);
  }
}

// ---- masked_fill: values are only moved, so it works on raw element bits of any dtype ----

template <class M> __device__ __forceinline__ bool is_set(M m) { return m != M(0); }
template <> __device__ __forceinline__ bool is_set(bf16 m) { return to_compute(m) != 0.0f; }  // -0 is zero
template <> __device__ __forceinline__ bool is_set(f16 m) { return to_compute(m) != 0.0f; }

template <class Index, class Bits, class M>
__global__ void masked_fill_kernel(Index n, StridedLayout<3> layout, Bits value, Bits* out, const Bits* x,
                                   const M* mask) {
  BRIGADE_GRID_STRIDE_LOOP(i, n, Index) {
    int64_t off[3];
    layout.offsets(i, off);
    out[off[0]] = is_set(mask[off[2]]) ? value : x[off[1]];
  }
}

template <class Bits, class M>
void masked_fill_typed(const Tensor& out, const Tensor& x, const Tensor& mask, Bits value) {
  const int64_t n = out.numel();
  const StridedLayout<3> layout = make_layout<3>("masked_fill", out.shape(), {&out, &x, &mask});
  const auto* xp = static_cast<const Bits*>(x.raw_data());
  const auto* mp = static_cast<const M*>(mask.raw_data());
  auto* op = static_cast<Bits*>(out.raw_data());
  cudaStream_t stream = stream_for(out);
  if (n <= int64_t(INT32_MAX)) {
    masked_fill_kernel<uint32_t><<<grid_for(n, out.device()), kThreads, 0, stream>>>(uint32_t(n), layout, value, op,
                                                                                     xp, mp);
  } else {
    masked_fill_kernel<uint64_t><<<grid_for(n, out.device()), kThreads, 0, stream>>>(uint64_t(n), layout, value, op,
                                                                                     xp, mp);
  }
  BRIGADE_CUDA_CHECK_LAUNCH();
}

// The fill value in out's dtype, as raw bits of its width (rounded once, like the CPU's from_double).
template <class Bits>
Bits value_bits(DType dtype, double value) {
  Bits bits = 0;
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (sizeof(T) == sizeof(Bits)) {
      const T v = from_double<T>(value);
      std::memcpy(&bits, &v, sizeof(T));
    }
  });
  return bits;
}

template <class Bits>
void masked_fill_bits(const Tensor& out, const Tensor& x, const Tensor& mask, double value) {
  const Bits bits = value_bits<Bits>(out.dtype(), value);
  switch (mask.dtype()) {
    case DType::f32: return masked_fill_typed<Bits, float>(out, x, mask, bits);
    case DType::f64: return masked_fill_typed<Bits, double>(out, x, mask, bits);
    case DType::bf16: return masked_fill_typed<Bits, bf16>(out, x, mask, bits);
    case DType::f16: return masked_fill_typed<Bits, f16>(out, x, mask, bits);
    case DType::i32: return masked_fill_typed<Bits, int32_t>(out, x, mask, bits);
    case DType::i64: return masked_fill_typed<Bits, int64_t>(out, x, mask, bits);
  }
}

}  // namespace

void binary(ops::BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  visit_floating(out.dtype(), "binary", [&](auto tag) { binary_typed<decltype(tag)>(op, out, a, b); });
}

void unary(ops::UnaryOp op, const Tensor& out, const Tensor& x) {
  visit_floating(out.dtype(), "unary", [&](auto tag) { unary_typed<decltype(tag)>(op, out, x); });
}

void unary_backward(ops::UnaryOp op, const Tensor& grad_x, const Tensor& grad_y, const Tensor& x, const Tensor& y) {
  visit_floating(grad_x.dtype(), "unary_backward",
                 [&](auto tag) { unary_backward_typed<decltype(tag)>(op, grad_x, grad_y, x, y); });
}

void scale_shift(const Tensor& out, const Tensor& x, double scale, double shift) {
  visit_floating(out.dtype(), "scale_shift", [&](auto tag) {
    using T = decltype(tag);
    map<T, T>("scale_shift", ScaleShift{scale, shift}, out, x);
  });
}

void pow_scalar(const Tensor& out, const Tensor& x, double exponent) {
  visit_floating(out.dtype(), "pow", [&](auto tag) {
    using T = decltype(tag);
    map<T, T>("pow", Pow{exponent}, out, x);
  });
}

void pow_scalar_backward(const Tensor& grad_x, const Tensor& grad_y, const Tensor& x, double exponent) {
  visit_floating(grad_x.dtype(), "pow_backward", [&](auto tag) {
    using T = decltype(tag);
    map<T, T, T>("pow_backward", PowBackward{exponent}, grad_x, grad_y, x);
  });
}

void add_inplace(const Tensor& dst, const Tensor& src, double alpha) {
  // dst is both the output and the first input: each element reads itself, then writes itself.
  visit_floating(dst.dtype(), "add_", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, float> && !std::is_same_v<T, double>) {
      // A 16-bit destination may take an f32 source: the sum is formed in f32 and rounded once.
      if (src.dtype() == DType::f32) return map<T, T, float>("add_", AddScaled{alpha}, dst, dst, src);
    }
    map<T, T, T>("add_", AddScaled{alpha}, dst, dst, src);
  });
}

void masked_fill(const Tensor& out, const Tensor& x, const Tensor& mask, double value) {
  if (out.numel() == 0) return;
  switch (out.element_size()) {
    case 2: return masked_fill_bits<uint16_t>(out, x, mask, value);
    case 4: return masked_fill_bits<uint32_t>(out, x, mask, value);
    case 8: return masked_fill_bits<uint64_t>(out, x, mask, value);
    default: fail("masked_fill: unsupported element size ", out.element_size());
  }
}

}  // namespace brigade::cuda
