// Module: the base of every layer and model — a tree of named parameters, buffers and child modules.
//
// A layer registers what it owns in its constructor:
//
//   struct Affine : nn::Module {
//     Tensor scale, shift;
//     Affine(int64_t n) {
//       scale = register_parameter("scale", ones({n}));   // becomes a leaf that requires grad
//       shift = register_parameter("shift", zeros({n}));
//     }
//     std::string name() const override { return "Affine"; }
//     Tensor forward(const Tensor& x) override { return x * scale + shift; }
//   };
//
// The registry holds the same Tensor handles as the members, so the tree can be walked
// (named_parameters, state_dict, train/eval, zero_grad) without knowing any layer's type. Names are
// dotted paths in registration order: "blocks.0.attn.qkv.weight".
//
// A tensor registered in two places (a tied weight) is listed once, under the first name reached,
// by every walk — parameters(), parameter_count(), state_dict() — so an optimizer updates it once.
// Modules are shared by std::shared_ptr and are not copyable.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace brigade::nn {

using StateDict = std::map<std::string, Tensor>;  // name -> tensor (parameters and buffers)
template <class T>
using Named = std::vector<std::pair<std::string, T>>;

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The type, for printing ("Linear"), and its settings ("in=4, out=8, bias=true").
  virtual std::string name() const { return "Module"; }
  virtual std::string details() const { return ""; }

  // The one-tensor-in, one-tensor-out interface Sequential and the pipeline chain modules through.
  // Modules with other signatures keep the default, which throws "<name> does not take a single tensor".
  virtual Tensor forward(const Tensor& x);
  // Calls forward, under Autocast(compute_dtype()) when one is set. Call modules this way — a
  // layer its children too, `(*fc)(x)`, as nn/'s layers, Sequential and the pipeline do — so a
  // compute dtype set on any part of a model applies to that part.
  Tensor operator()(const Tensor& x);

  // ---- registration (call from constructors) ----
  // Names are non-empty, dot-free and unique within this module. Returns the registered handle.
  Tensor register_parameter(const std::string& name, Tensor t);  // must be a floating-point leaf
  Tensor register_buffer(const std::string& name, Tensor t);      // state that is saved but not trained
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }

  // ---- walking the tree (depth first, registration order, each tensor/module once) ----
  Named<Tensor> named_parameters(bool recurse = true) const;
  std::vector<Tensor> parameters(bool recurse = true) const;
  Named<Tensor> named_buffers(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  Named<std::shared_ptr<Module>> named_children() const;
  Named<std::shared_ptr<Module>> named_modules() const;  // every descendant (not this one), dotted names
  int64_t parameter_count() const;                       // total elements of parameters()

  // ---- modes and gradients ----
  void train(bool on = true);  // recursive; modules start in training mode
  void eval() { train(false); }
  bool is_training() const { return training_; }
  void zero_grad();  // drops every parameter's .grad

  // ---- state ----
  // Parameters and buffers by dotted name. The tensors are the module's own (not copies).
  StateDict state_dict() const;
  // Copies values into the existing tensors in place (so tied weights and optimizer references stay
  // valid). Every key present in both must match in shape and dtype; with `strict`, keys missing from
  // `state` or unknown to the module are errors too. Nothing is copied unless every check passes.
  void load_state_dict(const StateDict& state, bool strict = true);

  // Converts every parameter and buffer in place (same Tensor handles, new bytes); gradients are
  // dropped. Call between steps, not while a tape holds the old values.
  void to(DType dtype);
  void to(Device device);

  // ---- mixed precision ----
  // The dtype the module computes in (recursive): operator() runs forward inside
  // Autocast(dtype) (autograd/autocast.h), so every differentiable function takes its f32 inputs —
  // parameters included — in `dtype`. Parameters keep their own dtype (f32 master weights);
  // activations are in `dtype` (bf16: half the bytes, tensor-core GEMMs), and gradients come back
  // to the parameters in f32 and accumulate in f32 across micro-batches. A layer needs no code for
  // it. Modules registered after this call do not inherit it: call it once the model is built.
  void set_compute_dtype(DType dtype);
  std::optional<DType> compute_dtype() const { return compute_dtype_; }

  // The module tree, one line per module, with parameter counts:
  //   GPT(vocab_size=65, ...) (52,736 parameters)
  //     embed: GPTEmbedding (4,096 parameters)
  //       wte: Embedding(num=65, dim=32) (2,080 parameters)
  std::string describe() const;

 private:
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  void check_new_name(const char* what, const std::string& name) const;
  void describe_into(std::string& out, const std::string& label, int depth) const;

  Named<Tensor> parameters_;
  Named<Tensor> buffers_;
  Named<std::shared_ptr<Module>> children_;
  bool training_ = true;
  std::optional<DType> compute_dtype_;
};

// Eval mode (no dropout) for a scope, then the mode the module was in: evaluation in the middle of
// training leaves it training.
class EvalScope {
 public:
  explicit EvalScope(Module& module) : module_(module), was_training_(module.is_training()) { module_.eval(); }
  ~EvalScope() { module_.train(was_training_); }
  EvalScope(const EvalScope&) = delete;
  EvalScope& operator=(const EvalScope&) = delete;

 private:
  Module& module_;
  bool was_training_;
};

}  // namespace brigade::nn
