#include "nn/module.h"

#include <unordered_set>

#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "autograd/tape.h"
#include "core/format.h"
#include "kernels/ops.h"

namespace brigade::nn {
namespace {

// Depth-first walk over the tensors of one kind (parameters or buffers), skipping any tensor already
// reached under another name (a tied weight), so every tensor appears once.
template <class Get>
void collect(const Module& m, const std::string& prefix, bool recurse, Get get, Named<Tensor>& out,
             std::unordered_set<const TensorImpl*>& seen) {
  for (const auto& [name, t] : get(m))
    if (seen.insert(&t.impl()).second) out.emplace_back(prefix + name, t);
  if (!recurse) return;
  for (const auto& [name, child] : m.named_children()) collect(*child, prefix + name + ".", true, get, out, seen);
}

std::string quoted_list(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "'" : ", '") + n + "'";
  return out;
}

// Makes `t`'s existing TensorImpl point at `replacement`'s bytes: every handle to t (module members,
// the registry, a tied use elsewhere) sees the change, and t keeps its identity and requires_grad.
void replace_data(const Tensor& t, const Tensor& replacement) {
  TensorImpl& impl = t.impl();
  impl.storage = replacement.storage();
  impl.offset = replacement.offset();
  impl.shape = replacement.shape();
  impl.strides = replacement.strides();
  impl.dtype = replacement.dtype();
  impl.grad.reset();
}

}  // namespace

Tensor Module::forward(const Tensor&) { fail(name(), " does not take a single tensor"); }

void Module::check_new_name(const char* what, const std::string& name) const {
  BRIGADE_CHECK(!name.empty() && name.find('.') == std::string::npos, what, ": invalid name '", name, "' in ",
                this->name(), " (names must be non-empty and contain no '.')");
  auto taken = [&](const auto& list) {
    for (const auto& entry : list)
      if (entry.first == name) return true;
    return false;
  };
  BRIGADE_CHECK(!taken(parameters_) && !taken(buffers_) && !taken(children_), what, ": '", name,
                "' is already registered in ", this->name());
}

Tensor Module::register_parameter(const std::string& name, Tensor t) {
  check_new_name("register_parameter", name);
  BRIGADE_CHECK(t.defined(), "register_parameter: '", name, "' is an undefined tensor");
  BRIGADE_CHECK(is_floating(t.dtype()), "register_parameter: '", name, "' must be floating-point, got ",
                dtype_name(t.dtype()));
  BRIGADE_CHECK(t.is_leaf(), "register_parameter: '", name,
                "' was produced by a recorded op; register a leaf (e.g. t.detach())");
  t.requires_grad_(true);
  parameters_.emplace_back(name, t);
  return t;
}

Tensor Module::register_buffer(const std::string& name, Tensor t) {
  check_new_name("register_buffer", name);
  BRIGADE_CHECK(t.defined(), "register_buffer: '", name, "' is an undefined tensor");
  buffers_.emplace_back(name, t);
  return t;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name("register_module", name);
  BRIGADE_CHECK(module != nullptr, "register_module: '", name, "' is a null module");
  BRIGADE_CHECK(module.get() != this, "register_module: '", name, "' is the module itself");
  children_.emplace_back(name, std::move(module));
}

Named<Tensor> Module::named_parameters(bool recurse) const {
  Named<Tensor> out;
  std::unordered_set<const TensorImpl*> seen;
  collect(*this, "", recurse, [](const Module& m) -> const Named<Tensor>& { return m.parameters_; }, out, seen);
  return out;
}

Named<Tensor> Module::named_buffers(bool recurse) const {
  Named<Tensor> out;
  std::unordered_set<const TensorImpl*> seen;
  collect(*this, "", recurse, [](const Module& m) -> const Named<Tensor>& { return m.buffers_; }, out, seen);
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_buffers(recurse)) out.push_back(t);
  return out;
}

Named<std::shared_ptr<Module>> Module::named_children() const { return children_; }

Named<std::shared_ptr<Module>> Module::named_modules() const {
  Named<std::shared_ptr<Module>> out;
  std::unordered_set<const Module*> seen;
  auto walk = [&](auto&& self, const Module& m, const std::string& prefix) -> void {
    for (const auto& [name, child] : m.children_) {
      if (!seen.insert(child.get()).second) continue;
      out.emplace_back(prefix + name, child);
      self(self, *child, prefix + name + ".");
    }
  };
  walk(walk, *this, "");
  return out;
}

int64_t Module::parameter_count() const {
  int64_t n = 0;
  for (const Tensor& p : parameters()) n += p.numel();
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

void Module::set_compute_dtype(DType dtype) {
  BRIGADE_CHECK(is_floating(dtype), name(), ": the compute dtype must be floating point, got ", dtype_name(dtype));
  compute_dtype_ = dtype;
  for (auto& [name, child] : children_) child->set_compute_dtype(dtype);
}

Tensor Module::operator()(const Tensor& x) {
  if (!compute_dtype_) return forward(x);  // an outer scope, if any, stays in force
  Autocast scope(*compute_dtype_);
  return forward(x);
}

void Module::zero_grad() {
  for (Tensor p : parameters()) p.zero_grad();
}

StateDict Module::state_dict() const {
  StateDict out;
  for (auto& [name, t] : named_parameters()) out.emplace(name, t);
  for (auto& [name, t] : named_buffers()) out.emplace(name, t);
  return out;
}

void Module::load_state_dict(const StateDict& state, bool strict) {
  StateDict own = state_dict();
  std::vector<std::string> missing, unexpected;
  for (const auto& [key, t] : own)
    if (!state.count(key)) missing.push_back(key);
  for (const auto& [key, t] : state)
    if (!own.count(key)) unexpected.push_back(key);
  if (strict && (!missing.empty() || !unexpected.empty())) {
    std::string msg = "load_state_dict (" + name() + "):";
    if (!missing.empty()) msg += " missing keys " + quoted_list(missing) + ";";
    if (!unexpected.empty()) msg += " unexpected keys " + quoted_list(unexpected) + ";";
    msg.pop_back();
    fail(msg);
  }

  // Check everything before copying anything, so a failed load leaves the module untouched.
  for (const auto& [key, dst] : own) {
    auto it = state.find(key);
    if (it == state.end()) continue;
    const Tensor& src = it->second;
    BRIGADE_CHECK(src.defined(), "load_state_dict: '", key, "' is an undefined tensor in the state dict");
    BRIGADE_CHECK(src.shape() == dst.shape(), "load_state_dict: '", key, "' has shape ", shape_str(dst.shape()),
                  " in the module but ", shape_str(src.shape()), " in the state dict");
    BRIGADE_CHECK(src.dtype() == dst.dtype(), "load_state_dict: '", key, "' has dtype ", dtype_name(dst.dtype()),
                  " in the module but ", dtype_name(src.dtype()), " in the state dict");
  }
  NoGradGuard no_grad;
  for (const auto& [key, dst] : own) {
    auto it = state.find(key);
    if (it == state.end() || it->second.same_as(dst)) continue;
    const Tensor& src = it->second;
    ops::copy_(dst, src.device() == dst.device() ? src : src.to(dst.device()));
  }
}

void Module::to(DType dtype) {
  BRIGADE_CHECK(is_floating(dtype), "Module::to: target dtype must be floating-point, got ", dtype_name(dtype));
  NoGradGuard no_grad;
  // Integer buffers (indices, counters) keep their dtype, as in PyTorch.
  for (auto& [key, t] : state_dict())
    if (is_floating(t.dtype()) && t.dtype() != dtype) replace_data(t, ops::to_dtype(t, dtype));
}

void Module::to(Device device) {
  NoGradGuard no_grad;
  for (auto& [key, t] : state_dict())
    if (t.device() != device) replace_data(t, t.to(device));
}

std::string Module::describe() const {
  std::string out;
  describe_into(out, "", 0);
  return out;
}

void Module::describe_into(std::string& out, const std::string& label, int depth) const {
  out += std::string(size_t(depth) * 2, ' ') + label + name();
  std::string d = details();
  if (!d.empty()) out += "(" + d + ")";
  int64_t count = parameter_count();
  if (count > 0) out += " (" + with_commas(count) + " parameters)";
  out += "\n";
  for (const auto& [child_name, child] : children_) child->describe_into(out, child_name + ": ", depth + 1);
}

}  // namespace brigade::nn
