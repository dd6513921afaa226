// ops: adamw_step_ — the multi-tensor AdamW update (the math is in kernels/cpu/adamw.cpp).
//
// Everything is checked before anything is written, so a bad entry anywhere in the lists leaves every
// parameter and every state tensor untouched.
#include "kernels/cpu/kernels.h"
#include "kernels/ops.h"

namespace brigade::ops {
namespace {

constexpr const char* kOp = "adamw_step_";

void check_hyperparameters(const AdamWParams& p) {
  BRIGADE_CHECK(p.step >= 1, kOp, ": step must be >= 1 (it is 1-based), got ", p.step);
  BRIGADE_CHECK(p.lr >= 0, kOp, ": learning rate must be >= 0, got ", p.lr);
  BRIGADE_CHECK(p.eps >= 0, kOp, ": eps must be >= 0, got ", p.eps);
  BRIGADE_CHECK(p.weight_decay >= 0, kOp, ": weight_decay must be >= 0, got ", p.weight_decay);
  BRIGADE_CHECK(p.beta1 >= 0 && p.beta1 < 1 && p.beta2 >= 0 && p.beta2 < 1, kOp, ": betas must be in [0, 1), got (",
                p.beta1, ", ", p.beta2, ")");
}

// Checks entry i of the lists: every tensor defined, floating, shaped like the parameter, on its device.
void check_entry(size_t i, const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                 const Tensor& first_param) {
  const auto where = [i](const char* what) { return std::string(what) + " " + std::to_string(i); };
  check_defined(kOp, param, where("param").c_str());
  check_defined(kOp, grad, where("grad").c_str());
  check_defined(kOp, m, where("exp_avg").c_str());
  check_defined(kOp, v, where("exp_avg_sq").c_str());
  BRIGADE_CHECK(is_floating(param.dtype()) && is_floating(grad.dtype()), kOp, ": param ", i, " (",
                dtype_name(param.dtype()), ") and its grad (", dtype_name(grad.dtype()), ") must be floating-point");
  BRIGADE_CHECK((m.dtype() == DType::f32 || m.dtype() == DType::f64) && m.dtype() == v.dtype(), kOp,
                ": state of param ", i, " must be f32 or f64 (both the same), got exp_avg ", dtype_name(m.dtype()),
                " and exp_avg_sq ", dtype_name(v.dtype()));
  const Shape& s = param.shape();
  BRIGADE_CHECK(grad.shape() == s, kOp, ": param ", i, " has shape ", shape_str(s), " but its grad has shape ",
                shape_str(grad.shape()));
  BRIGADE_CHECK(m.shape() == s && v.shape() == s, kOp, ": param ", i, " has shape ", shape_str(s),
                " but its state has shapes ", shape_str(m.shape()), " (exp_avg) and ", shape_str(v.shape()),
                " (exp_avg_sq)");
  // One device for the whole list: the fused GPU kernel updates every tensor in one launch.
  for (const Tensor* t : {&param, &grad, &m, &v})
    BRIGADE_CHECK(t->device() == first_param.device(), kOp, ": tensors on different devices: param 0 is on ",
                  first_param.device().str(), ", but entry ", i, " has a tensor on ", t->device().str());
}

}  // namespace

void adamw_step_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const std::vector<Tensor>& m,
                 const std::vector<Tensor>& v, const AdamWParams& p) {
  BRIGADE_CHECK(grads.size() == params.size() && m.size() == params.size() && v.size() == params.size(), kOp,
                ": list lengths differ: ", params.size(), " params, ", grads.size(), " grads, ", m.size(),
                " exp_avg and ", v.size(), " exp_avg_sq");
  check_hyperparameters(p);
  if (params.empty()) return;
  for (size_t i = 0; i < params.size(); ++i) check_entry(i, params[i], grads[i], m[i], v[i], params[0]);
  check_cpu_backend(kOp, params[0]);

  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& param = params[i];
    if (is_half(param.dtype())) {
      // bf16/f16 weights: update an f32 copy and round once at the end, so the moments see the exact
      // f32 arithmetic and only the stored weight is rounded.
      Tensor wide = to_dtype(param, DType::f32);
      cpu::adamw_step(wide, to_dtype(grads[i], DType::f32), m[i], v[i], p);
      copy_(param, wide);
    } else {
      cpu::adamw_step(param, to_dtype(grads[i], param.dtype()), m[i], v[i], p);
    }
    param.storage().bump_version();
    m[i].storage().bump_version();
    v[i].storage().bump_version();
  }
}

}  // namespace brigade::ops
