// Differentiable elementwise ops. Broadcasting forward means summing backward: a gradient flowing
// to an input that was broadcast is reduced to the input's shape with ops::sum_to.
#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "autograd/tape.h"
#include "core/factory.h"
#include "kernels/ops.h"

namespace brigade {
namespace {

using ops::BinaryOp;
using ops::UnaryOp;

Tensor binary_op(BinaryOp op, const Tensor& a_in, const Tensor& b_in) {
  const Tensor a = autocast_to_match(a_in, b_in), b = autocast_to_match(b_in, a_in);
  Tensor out = ops::binary(op, a, b);
  // add and sub pass the gradient through: they keep their operands' shapes, not the operands (a
  // residual add would otherwise hold the sublayer's output until its backward).
  const bool reads_operands = op != BinaryOp::add && op != BinaryOp::sub;
  record(ops::binary_op_name(op), {a, b}, {out},
         [op, a = reads_operands ? a : Tensor(), b = reads_operands ? b : Tensor(), a_shape = a.shape(),
          b_shape = b.shape()](const std::vector<Tensor>& g, const std::vector<bool>& want) {
    const Tensor& gy = g[0];
    Tensor ga, gb;
    switch (op) {
      case BinaryOp::add:
        if (want[0]) ga = gy;
        if (want[1]) gb = gy;
        break;
      case BinaryOp::sub:
        if (want[0]) ga = gy;
        if (want[1]) gb = ops::unary(UnaryOp::neg, gy);
        break;
      case BinaryOp::mul:
        if (want[0]) ga = ops::binary(BinaryOp::mul, gy, b);
        if (want[1]) gb = ops::binary(BinaryOp::mul, gy, a);
        break;
      case BinaryOp::div:  // d(a/b)/da = 1/b, d(a/b)/db = -a/b^2
        if (want[0]) ga = ops::binary(BinaryOp::div, gy, b);
        if (want[1])
          gb = ops::unary(UnaryOp::neg, ops::binary(BinaryOp::div, ops::binary(BinaryOp::mul, gy, a),
                                                     ops::binary(BinaryOp::mul, b, b)));
        break;
    }
    if (ga.defined()) ga = ops::sum_to(ga, a_shape);
    if (gb.defined()) gb = ops::sum_to(gb, b_shape);
    return std::vector<Tensor>{ga, gb};
  });
  return out;
}

Tensor unary_op(UnaryOp op, const Tensor& x) {
  Tensor y = ops::unary(op, x);
  // The backward needs y for some ops; keep a detached handle so the tape doesn't hold y's autograd
  // identity (it holds the same bytes either way).
  Tensor y_saved = y.detach();
  record(ops::unary_op_name(op), {x}, {y}, [op, x, y_saved](const std::vector<Tensor>& g, const std::vector<bool>&) {
    return std::vector<Tensor>{ops::unary_backward(op, g[0], x, y_saved)};
  });
  return y;
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::add, a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::sub, a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::div, a, b); }

Tensor add(const Tensor& a, double b) {
  Tensor out = ops::scale_shift(a, 1.0, b);
  record("add_scalar", {a}, {out}, [](const std::vector<Tensor>& g, const std::vector<bool>&) {
    return std::vector<Tensor>{g[0]};
  });
  return out;
}

Tensor mul(const Tensor& a, double b) {
  Tensor out = ops::scale_shift(a, b, 0.0);
  record("mul_scalar", {a}, {out}, [b](const std::vector<Tensor>& g, const std::vector<bool>&) {
    return std::vector<Tensor>{ops::scale_shift(g[0], b, 0.0)};
  });
  return out;
}

Tensor neg(const Tensor& x) { return unary_op(UnaryOp::neg, x); }
Tensor exp(const Tensor& x) { return unary_op(UnaryOp::exp, x); }
Tensor log(const Tensor& x) { return unary_op(UnaryOp::log, x); }
Tensor sqrt(const Tensor& x) { return unary_op(UnaryOp::sqrt, x); }
Tensor rsqrt(const Tensor& x) { return unary_op(UnaryOp::rsqrt, x); }
Tensor tanh(const Tensor& x) { return unary_op(UnaryOp::tanh, x); }
Tensor relu(const Tensor& x) { return unary_op(UnaryOp::relu, x); }
Tensor gelu(const Tensor& x) { return unary_op(UnaryOp::gelu, x); }
Tensor silu(const Tensor& x) { return unary_op(UnaryOp::silu, x); }
Tensor sigmoid(const Tensor& x) { return unary_op(UnaryOp::sigmoid, x); }

Tensor pow(const Tensor& x, double exponent) {
  Tensor y = ops::pow_scalar(x, exponent);
  record("pow", {x}, {y}, [x, exponent](const std::vector<Tensor>& g, const std::vector<bool>&) {
    return std::vector<Tensor>{ops::pow_scalar_backward(g[0], x, exponent)};
  });
  return y;
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  Tensor y = ops::masked_fill(x, mask, value);
  record("masked_fill", {x}, {y}, [mask](const std::vector<Tensor>& g, const std::vector<bool>&) {
    return std::vector<Tensor>{ops::masked_fill(g[0], mask, 0.0)};  // filled positions pass no gradient
  });
  return y;
}

Tensor causal_mask(int64_t T, Device device, int64_t past) {
  BRIGADE_CHECK(T >= 0 && past >= 0, "causal_mask: negative size ", T, " or past ", past);
  const int64_t keys = past + T;
  std::vector<double> values(size_t(T * keys));
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < keys; ++j) values[size_t(i * keys + j)] = j > past + i ? 1.0 : 0.0;
  return from_vector(values, {T, keys}, DType::i32, device);
}

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& x) { return neg(x); }
Tensor operator+(const Tensor& a, double b) { return add(a, b); }
Tensor operator+(double a, const Tensor& b) { return add(b, a); }
Tensor operator-(const Tensor& a, double b) { return add(a, -b); }
Tensor operator-(double a, const Tensor& b) { return add(neg(b), a); }
Tensor operator*(const Tensor& a, double b) { return mul(a, b); }
Tensor operator*(double a, const Tensor& b) { return mul(b, a); }
Tensor operator/(const Tensor& a, double b) { return mul(a, 1.0 / b); }

}  // namespace brigade
