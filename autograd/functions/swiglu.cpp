// Differentiable SwiGLU gate, silu(gate) * up: one kernel forward, one backward for both inputs.
#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "autograd/tape.h"
#include "kernels/ops.h"

namespace brigade {

Tensor swiglu(const Tensor& gate_in, const Tensor& up_in) {
  // The dtype rule of mul(silu(gate), up), which this replaces.
  const Tensor gate = autocast_to_match(gate_in, up_in), up = autocast_to_match(up_in, gate_in);
  Tensor y = ops::swiglu(gate, up);
  record("swiglu", {gate, up}, {y}, [gate, up](const std::vector<Tensor>& g, const std::vector<bool>&) {
    auto [grad_gate, grad_up] = ops::swiglu_backward(g[0], gate, up);
    return std::vector<Tensor>{grad_gate, grad_up};
  });
  return y;
}

}  // namespace brigade
