// A differentiable op of your own: the Huber loss, its forward and backward written by hand, checked
// against finite differences.
//
// Every function in autograd/functions/ is built the way `huber` is here: compute the output, then
// call record(name, inputs, outputs, backward) from autograd/tape.h. While a tape is recording and an
// input requires grad, record appends a node; tape.backward() later calls `backward` with the
// gradient of the output and a `want` mask saying which inputs' gradients are needed.
// gradcheck (autograd/gradcheck.h) then compares that backward with central finite differences.
//
// Build and run it against an installed brigade (`meson install -C build`):
//   c++ -std=c++20 -O2 examples/custom_op.cpp $(pkg-config --cflags --libs brigade) -o custom_op && ./custom_op
// or in the tree: ninja -C build examples/custom_op && build/examples/custom_op
// It exits 1 if the backward disagrees with finite differences.
#include <brigade.h>
#include "kernels/ops.h"  // the raw kernels, for the backward: not part of <brigade.h>

#include <cmath>
#include <cstdio>

using namespace brigade;

namespace {

// With d = pred - target, elementwise:  0.5 d²  where |d| <= delta,  delta (|d| - delta / 2)  elsewhere.
// Its slope in d is d clipped to [-delta, delta], so d/dpred = clip(d) and d/dtarget = -clip(d).
template <class T>
void huber_kernel(const T* pred, const T* target, T* out, int64_t n, double delta) {
  for (int64_t i = 0; i < n; ++i) {
    const double d = double(pred[i]) - double(target[i]);
    out[i] = T(std::abs(d) <= delta ? 0.5 * d * d : delta * (std::abs(d) - 0.5 * delta));
  }
}

// grad_pred = grad * clip(d); grad_target is its negation, so one kernel serves both (sign = ±1).
template <class T>
void huber_backward_kernel(const T* grad, const T* pred, const T* target, T* out, int64_t n, double delta,
                           double sign) {
  for (int64_t i = 0; i < n; ++i) {
    const double d = double(pred[i]) - double(target[i]);
    out[i] = T(sign * double(grad[i]) * std::fmax(-delta, std::fmin(delta, d)));
  }
}

// Runs `kernel<T>` for the tensors' dtype (f32 or f64) on contiguous copies; returns a new tensor.
template <class Kernel>
Tensor run_kernel(const char* name, std::vector<Tensor> inputs, Kernel kernel) {
  const Tensor& first = inputs[0];
  for (const Tensor& t : inputs) {
    BRIGADE_CHECK(t.device().is_cpu(), name, ": this example's kernels run on the CPU, got ", t.device().str());
    BRIGADE_CHECK(t.dtype() == first.dtype() && t.shape() == first.shape(), name,
                  ": inputs must share one shape and dtype");
  }
  for (Tensor& t : inputs) t = ops::contiguous(t);  // the raw op: nothing is recorded here
  Tensor out = empty(first.shape(), first.dtype());
  if (first.dtype() == DType::f64) kernel(inputs, out, double{});
  else if (first.dtype() == DType::f32) kernel(inputs, out, float{});
  else fail(name, ": needs f32 or f64, got ", dtype_name(first.dtype()));
  return out;
}

// The differentiable function: the forward, then the record of how to go backward.
Tensor huber(const Tensor& pred, const Tensor& target, double delta) {
  Tensor out = run_kernel("huber", {pred, target}, [delta](const std::vector<Tensor>& in, Tensor& o, auto t) {
    using T = decltype(t);
    huber_kernel(in[0].data<T>(), in[1].data<T>(), o.data<T>(), o.numel(), delta);
  });
  // The closure keeps pred and target alive until the tape is freed; the tape refuses to run it if
  // either was modified in place in the meantime.
  record("huber", {pred, target}, {out}, [pred, target, delta](const std::vector<Tensor>& grads,
                                                               const std::vector<bool>& want) {
    auto grad_for = [&](double sign) {
      return run_kernel("huber backward", {grads[0], pred, target},
                        [delta, sign](const std::vector<Tensor>& in, Tensor& o, auto t) {
                          using T = decltype(t);
                          huber_backward_kernel(in[0].data<T>(), in[1].data<T>(), in[2].data<T>(), o.data<T>(),
                                                o.numel(), delta, sign);
                        });
    };
    // An input that needs no gradient (a fixed target) gets none: nothing is computed for it.
    return std::vector<Tensor>{want[0] ? grad_for(+1) : Tensor(), want[1] ? grad_for(-1) : Tensor()};
  });
  return out;
}

}  // namespace

int main() {
  try {
    // The forward at two points by hand: |d| = 0.5 is inside delta = 1, |d| = 3 outside.
    std::vector<double> values = huber(tensor({0.5, -3.0}), tensor({0.0, 0.0}), 1.0).to_vector();
    const bool forward_ok = values == std::vector<double>{0.125, 2.5};
    std::printf("huber([0.5, -3], 0, delta=1) = [%g, %g]  (want [0.125, 2.5])\n", values[0], values[1]);

    // The backward against finite differences, in f64: both inputs, then the prediction alone.
    Generator gen(0);
    Tensor pred = randn({4, 5}, DType::f64, Device::cpu(), &gen) * 2.0;  // about half of |d| > delta
    Tensor target = randn({4, 5}, DType::f64, Device::cpu(), &gen);
    auto f = [](const std::vector<Tensor>& in) { return huber(in[0], in[1], 1.0); };
    GradcheckResult both = gradcheck(f, {pred.detach().requires_grad_(), target.detach().requires_grad_()});
    GradcheckResult pred_only = gradcheck(f, {pred.detach().requires_grad_(), target});
    std::printf("gradcheck, pred and target: %s\n", both ? "ok" : both.message.c_str());
    std::printf("gradcheck, pred only:       %s\n", pred_only ? "ok" : pred_only.message.c_str());

    // And on a tape like any other op: the mean Huber loss of a prediction, backward into pred.
    Tensor p = pred.detach().requires_grad_();
    Tape tape;
    Tensor loss = tape.record([&] { return mean(huber(p, target, 1.0)); });
    tape.backward(loss);
    const bool tape_ok = p.grad().defined() && p.grad().shape() == p.shape();
    std::printf("mean huber loss %.4f, gradient %s\n", loss.item(), tape_ok ? "reached pred" : "missing");

    return forward_ok && both && pred_only && tape_ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "custom_op: %s\n", e.what());
    return 1;
  }
}
