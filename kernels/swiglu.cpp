// ops: SwiGLU's gate, silu(gate) * up, and its backward — each one pass over the hidden activations.
#include "kernels/dispatch.h"
#include "kernels/ops.h"

namespace brigade::ops {
namespace {

void check_pair(const char* op, const Tensor& a, const char* a_name, const Tensor& b, const char* b_name) {
  check_defined(op, a, a_name);
  check_defined(op, b, b_name);
  check_floating(op, a);
  check_same_device(op, a, b);
  check_same_dtype(op, a, b);
  BRIGADE_CHECK(a.shape() == b.shape(), op, ": ", a_name, " ", shape_str(a.shape()), " and ", b_name, " ",
                shape_str(b.shape()), " must have one shape");
}

// The dtype the kernels take data in: the CPU widens bf16/f16 to f32, CUDA takes them as they are.
DType kernel_dtype(const Tensor& x) { return x.device().is_cpu() && is_half(x.dtype()) ? DType::f32 : x.dtype(); }
Tensor kernel_input(const Tensor& x) { return contiguous(to_dtype(x, kernel_dtype(x))); }

}  // namespace

Tensor swiglu(const Tensor& gate, const Tensor& up) {
  check_pair("swiglu", gate, "gate", up, "up");
  const Tensor g = kernel_input(gate), u = kernel_input(up);
  Tensor y = empty(gate.shape(), g.dtype(), gate.device());
  BRIGADE_DISPATCH("swiglu", gate, swiglu(y, g, u));
  return to_dtype(y, gate.dtype());
}

std::pair<Tensor, Tensor> swiglu_backward(const Tensor& grad_y, const Tensor& gate, const Tensor& up) {
  check_pair("swiglu_backward", gate, "gate", up, "up");
  check_pair("swiglu_backward", grad_y, "grad_y", gate, "gate");
  const Tensor gy = kernel_input(grad_y), g = kernel_input(gate), u = kernel_input(up);
  Tensor grad_gate = empty(gate.shape(), g.dtype(), gate.device());
  Tensor grad_up = empty(gate.shape(), g.dtype(), gate.device());
  BRIGADE_DISPATCH("swiglu_backward", gate, swiglu_backward(grad_gate, grad_up, gy, g, u));
  return {to_dtype(grad_gate, gate.dtype()), to_dtype(grad_up, gate.dtype())};
}

}  // namespace brigade::ops
