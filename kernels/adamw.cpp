// ops: adamw_step_ — the multi-tensor AdamW update (the math is in kernels/cpu/adamw.cpp).
//
// Everything is checked before anything is written, so a bad entry anywhere in the lists leaves every
// parameter and every state tensor untouched.
#include <functional>

#include "core/factory.h"
#include "kernels/dispatch.h"
#include "kernels/ops.h"
#include "kernels/optimizer_ops.h"

#if BRIGADE_HAVE_CUDA
#include "kernels/cuda/optimizer_kernels.h"
#endif

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
  // Written in place: an element stored twice (an expanded view) would be updated twice at once.
  check_no_self_overlap(kOp, param);
  check_no_self_overlap(kOp, m);
  check_no_self_overlap(kOp, v);
}

}  // namespace

namespace {

// Checks the lists, converts what the kernels cannot take, runs `update` on the converted lists and
// writes the results back.
void update_lists(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const std::vector<Tensor>& m,
                  const std::vector<Tensor>& v,
                  const std::function<void(const std::vector<Tensor>&, const std::vector<Tensor>&)>& update) {
  BRIGADE_CHECK(grads.size() == params.size() && m.size() == params.size() && v.size() == params.size(), kOp,
                ": list lengths differ: ", params.size(), " params, ", grads.size(), " grads, ", m.size(),
                " exp_avg and ", v.size(), " exp_avg_sq");
  if (params.empty()) return;
  for (size_t i = 0; i < params.size(); ++i) check_entry(i, params[i], grads[i], m[i], v[i], params[0]);

  // What the kernels take: each gradient in its parameter's dtype (a gradient that shares memory
  // with anything written here is copied first). The CPU reference has no 16-bit arithmetic, so a
  // bf16/f16 weight is updated in an f32 copy and rounded once at the end — the moments see exact
  // f32 arithmetic, only the stored weight is rounded; CUDA kernels do the same in registers.
  const bool cpu = params[0].device().is_cpu();
  std::vector<Tensor> work_params(params.size()), work_grads(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const DType t = cpu && is_half(params[i].dtype()) ? DType::f32 : params[i].dtype();
    work_params[i] = to_dtype(params[i], t);
    Tensor g = grads[i];
    if (may_overlap(g, params[i]) || may_overlap(g, m[i]) || may_overlap(g, v[i])) g = clone(g);
    work_grads[i] = to_dtype(g, t);
  }
  update(work_params, work_grads);
  for (size_t i = 0; i < params.size(); ++i) {
    if (!work_params[i].same_as(params[i])) copy_(params[i], work_params[i]);
    params[i].storage().bump_version();
    m[i].storage().bump_version();
    v[i].storage().bump_version();
  }
}

[[noreturn]] void no_cuda(const char* op) {
  throw Error(std::string(op) + ": staged AdamW coefficients are for CUDA graphs, and this build has no CUDA");
}

void check_staging(const char* op, const Tensor& staged) {
  check_defined(op, staged, "staged coefficients");
  BRIGADE_CHECK(staged.device().is_cuda(), op, ": the staged coefficients must be on a GPU, got ", staged.device().str());
#if BRIGADE_HAVE_CUDA
  BRIGADE_CHECK(staged.is_contiguous() && size_t(staged.nbytes()) >= cuda::adamw_staged_bytes(), op,
                ": the staged coefficients must be a buffer from adamw_staging_buffer, got ", dtype_name(staged.dtype()),
                " of shape ", shape_str(staged.shape()));
#endif
}

}  // namespace

void adamw_step_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const std::vector<Tensor>& m,
                 const std::vector<Tensor>& v, const AdamWParams& p) {
  check_hyperparameters(p);
  update_lists(params, grads, m, v, [&](const std::vector<Tensor>& work_params, const std::vector<Tensor>& work_grads) {
    BRIGADE_DISPATCH(kOp, params[0], adamw_step(work_params, work_grads, m, v, p));
  });
}

Tensor adamw_staging_buffer(Device device) {
  BRIGADE_CHECK(device.is_cuda(), "adamw_staging_buffer: staged coefficients live on a GPU, got ", device.str());
#if BRIGADE_HAVE_CUDA
  return empty({int64_t((cuda::adamw_staged_bytes() + 7) / 8)}, DType::f64, device);
#else
  no_cuda("adamw_staging_buffer");
#endif
}

void adamw_stage_(const Tensor& staged, const AdamWParams& p) {
  check_staging("adamw_stage_", staged);
  check_hyperparameters(p);
#if BRIGADE_HAVE_CUDA
  cuda::adamw_stage(staged, p);
  staged.storage().bump_version();
#else
  no_cuda("adamw_stage_");
#endif
}

void adamw_step_staged_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                        const std::vector<Tensor>& m, const std::vector<Tensor>& v, const Tensor& staged) {
  check_staging("adamw_step_staged_", staged);
  if (!params.empty()) check_same_device("adamw_step_staged_", params[0], staged);
  update_lists(params, grads, m, v, [&](const std::vector<Tensor>& work_params, const std::vector<Tensor>& work_grads) {
#if BRIGADE_HAVE_CUDA
    cuda::adamw_step_staged(work_params, work_grads, m, v, staged);
#else
    (void)work_params, (void)work_grads;
    no_cuda("adamw_step_staged_");
#endif
  });
}

}  // namespace brigade::ops
