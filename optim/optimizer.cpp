#include "optim/optimizer.h"

#include <cmath>
#include <set>

#include "core/cuda_graph.h"
#include "core/factory.h"
#include "kernels/ops.h"

namespace brigade::optim {
namespace {

// A private copy of `t` with the given dtype on the given device, so restored state never aliases
// the caller's tensors.
Tensor owned_copy(const Tensor& t, DType dtype, Device device) {
  Tensor src = t.device() == device ? t : t.detach().to(device);  // detached: never taped
  Tensor out = empty(t.shape(), dtype, device);
  ops::copy_(out, src);
  return out;
}

// The value of a scalar entry of a state dict, checked for shape and dtype.
double scalar_entry(const char* optimizer, const std::string& key, const Tensor& t, DType dtype) {
  BRIGADE_CHECK(t.defined(), optimizer, ".load_state_dict: '", key, "' is an undefined tensor");
  BRIGADE_CHECK(t.dim() == 0 && t.dtype() == dtype, optimizer, ".load_state_dict: '", key, "' must be a ",
                dtype_name(dtype), " scalar, got ", dtype_name(t.dtype()), " of shape ", shape_str(t.shape()));
  return t.item();
}

}  // namespace

Optimizer::Optimizer(const char* name, std::vector<ParamGroup> groups, double lr) : name_(name), lr_(lr) {
  check_non_negative("learning rate", lr);
  std::set<std::string> names;
  std::map<const TensorImpl*, std::string> name_of_tensor;
  for (ParamGroup& group : groups) {
    if (group.weight_decay) check_non_negative("a group's weight_decay", *group.weight_decay);
    for (auto& [pname, param] : group.params) {
      BRIGADE_CHECK(!pname.empty(), name_, ": a parameter has an empty name");
      BRIGADE_CHECK(param.defined(), name_, ": parameter '", pname, "' is an undefined tensor");
      BRIGADE_CHECK(is_floating(param.dtype()), name_, ": parameter '", pname, "' has dtype ",
                    dtype_name(param.dtype()), "; only floating-point tensors can be optimised");
      BRIGADE_CHECK(names.insert(pname).second, name_, ": two parameters are named '", pname, "'");
      // The same tensor twice would be updated twice per step (tied weights must be listed once).
      auto [it, fresh] = name_of_tensor.emplace(param.impl_ptr().get(), pname);
      BRIGADE_CHECK(fresh, name_, ": parameters '", it->second, "' and '", pname, "' are the same tensor; list it once");
      slots_.push_back(Slot{pname, param, group.weight_decay, 0, {}});
    }
  }
  BRIGADE_CHECK(!slots_.empty(), name_, ": got an empty parameter list");
}

void Optimizer::check_non_negative(const char* what, double value) const {
  BRIGADE_CHECK(std::isfinite(value) && value >= 0, name_, ": ", what, " must be a finite number >= 0, got ", value);
}

void Optimizer::set_lr(double lr) {
  check_non_negative("learning rate", lr);
  lr_ = lr;
}

void Optimizer::step() {
  std::vector<Slot*> active;
  Device checked = Device::cpu();  // the last device asked about a capture (never the CPU)
  for (Slot& slot : slots_) {
    Tensor grad = slot.param.grad();
    if (!grad.defined()) continue;  // unused this step (or frozen): no update, no state change
    BRIGADE_CHECK(grad.shape() == slot.param.shape(), name_, ".step: parameter '", slot.name, "' has shape ",
                  shape_str(slot.param.shape()), " but its gradient has shape ", shape_str(grad.shape()));
    BRIGADE_CHECK(grad.device() == slot.param.device(), name_, ".step: parameter '", slot.name, "' is on ",
                  slot.param.device().str(), " but its gradient is on ", grad.device().str());
    // Inside a CUDA graph the step count and learning rate would be frozen at their capture-time
    // values (kernel arguments); the update belongs outside the captured work (core/cuda_graph.h),
    // unless the optimizer reads them from device memory (AdamW::set_capturable).
    const Device device = slot.param.device();
    if (device != checked) {
      BRIGADE_CHECK(capturable() || !is_capturing(device), name_, ".step: parameter '", slot.name, "' is on ",
                    device.str(),
                    ", whose current stream is capturing a CUDA graph: an optimizer step cannot be recorded in a "
                    "graph (its step count and learning rate would be frozen); run it after the replay");
      checked = device;
    }
    active.push_back(&slot);
  }
  count_step(active);
  if (!active.empty()) update(active);
}

void Optimizer::count_step(const std::vector<Slot*>& active) {
  ++steps_;
  for (Slot* slot : active) ++slot->step;
}

void Optimizer::zero_grad() {
  for (Slot& slot : slots_) slot.param.zero_grad();
}

size_t Optimizer::state_bytes() const {
  size_t bytes = 0;
  for (const Slot& slot : slots_)
    for (const auto& [name, buffer] : slot.buffers) bytes += buffer.storage().nbytes();
  return bytes;
}

std::vector<Tensor> Optimizer::parameters() const {
  std::vector<Tensor> out;
  for (const Slot& slot : slots_) out.push_back(slot.param);
  return out;
}

std::vector<NamedTensor> Optimizer::named_parameters() const {
  std::vector<NamedTensor> out;
  for (const Slot& slot : slots_) out.emplace_back(slot.name, slot.param);
  return out;
}

DType Optimizer::state_dtype(const Tensor& param) {
  return param.dtype() == DType::f64 ? DType::f64 : DType::f32;
}

StateDict Optimizer::state_dict() const {
  StateDict out;
  out["step"] = scalar(double(steps_), DType::i64);
  out["lr"] = scalar(lr_, DType::f64);
  for (const Slot& slot : slots_) {
    if (slot.step == 0) continue;  // never updated: nothing to save
    out["step." + slot.name] = scalar(double(slot.step), DType::i64);
    for (const auto& [buffer, t] : slot.buffers) out[buffer + "." + slot.name] = ops::clone(t);
  }
  return out;
}

std::string Optimizer::parameter_of_key(const std::string& key) {
  // Buffer kinds have no dots; parameter names may.
  const size_t dot = key.find('.');
  return dot == std::string::npos ? std::string() : key.substr(dot + 1);
}

void Optimizer::load_state_dict(const StateDict& state) {
  const std::string where = std::string(name_) + ".load_state_dict";
  auto find = [&](const char* key) {
    auto it = state.find(key);
    BRIGADE_CHECK(it != state.end(), where, ": missing '", key, "'");
    return it->second;
  };
  const double steps = scalar_entry(name_, "step", find("step"), DType::i64);
  const double lr = scalar_entry(name_, "lr", find("lr"), DType::f64);
  BRIGADE_CHECK(steps >= 0, where, ": 'step' is negative (", steps, ")");
  check_non_negative("learning rate", lr);

  std::map<std::string, size_t> slot_of;
  for (size_t i = 0; i < slots_.size(); ++i) slot_of[slots_[i].name] = i;
  const std::vector<std::string> buffers = buffer_names();
  const std::set<std::string> known(buffers.begin(), buffers.end());

  // Parse and check every entry into new per-slot state; nothing changes until all of it is valid.
  std::vector<int64_t> new_steps(slots_.size(), 0);
  std::vector<std::map<std::string, Tensor>> new_buffers(slots_.size());
  for (const auto& [key, t] : state) {
    if (key == "step" || key == "lr") continue;
    // Keys are "<kind>.<param>"; kinds have no dots, parameter names usually do.
    const size_t dot = key.find('.');
    BRIGADE_CHECK(dot != std::string::npos, where, ": unexpected key '", key, "'");
    const std::string kind = key.substr(0, dot), pname = key.substr(dot + 1);
    auto it = slot_of.find(pname);
    BRIGADE_CHECK(it != slot_of.end(), where, ": '", key, "' is for parameter '", pname,
                  "', which this optimizer does not have");
    const Slot& slot = slots_[it->second];
    if (kind == "step") {
      const double s = scalar_entry(name_, key, t, DType::i64);
      BRIGADE_CHECK(s >= 1, where, ": '", key, "' must be >= 1, got ", s);
      new_steps[it->second] = int64_t(s);
    } else {
      BRIGADE_CHECK(known.count(kind), where, ": unexpected key '", key, "' (", name_, " keeps no '", kind,
                    "' state", buffers.empty() ? " with these options" : "", ")");
      BRIGADE_CHECK(t.defined() && is_floating(t.dtype()), where, ": '", key, "' must be a floating-point tensor");
      BRIGADE_CHECK(t.shape() == slot.param.shape(), where, ": '", key, "' has shape ", shape_str(t.shape()),
                    " but parameter '", pname, "' has shape ", shape_str(slot.param.shape()));
      new_buffers[it->second][kind] = owned_copy(t, state_dtype(slot.param), slot.param.device());
    }
  }
  // A parameter's state is all or nothing: a step count and every buffer, or neither.
  for (size_t i = 0; i < slots_.size(); ++i) {
    const std::string& pname = slots_[i].name;
    for (const std::string& buffer : buffers) {
      if (new_steps[i] > 0)
        BRIGADE_CHECK(new_buffers[i].count(buffer), where, ": missing '", buffer, ".", pname, "' (the state has 'step.",
                      pname, "')");
    }
    if (new_steps[i] == 0)
      BRIGADE_CHECK(new_buffers[i].empty(), where, ": '", new_buffers[i].begin()->first, ".", pname,
                    "' is given without 'step.", pname, "'");
  }

  steps_ = int64_t(steps);
  lr_ = lr;
  for (size_t i = 0; i < slots_.size(); ++i) {
    slots_[i].step = new_steps[i];
    slots_[i].buffers = std::move(new_buffers[i]);
  }
}

}  // namespace brigade::optim
