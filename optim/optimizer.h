// Optimizer: the part every optimizer shares — the parameter list, the learning rate, per-parameter
// state, and saving/restoring that state.
//
// An optimizer holds named parameters (the names a model's named_parameters() gives, e.g.
// "blocks.0.attn.qkv.weight"); the names only label the state in state_dict(). Parameters can be
// split into groups to give some of them a different weight decay (usually: none on biases and norm
// weights). step() updates, in place, every parameter that has a gradient and skips the rest.
//
// Optimizers take plain tensors, never nn::Module, so nn/ may depend on optim/ and not the reverse.
//
//   AdamW opt(model.named_parameters(), AdamWOptions{.lr = 3e-4});
//   for (...) { opt.zero_grad(); tape.backward(loss); opt.step(); }
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace brigade::optim {

using NamedTensor = std::pair<std::string, Tensor>;
using StateDict = std::map<std::string, Tensor>;

// Parameters that share hyper-parameter overrides. Unset overrides fall back to the optimizer's options.
struct ParamGroup {
  std::vector<NamedTensor> params;
  std::optional<double> weight_decay;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  const char* name() const { return name_; }  // "SGD", "AdamW": prefixes error messages

  // Updates every parameter that has a gradient (in place; never recorded on a tape).
  void step();
  // Drops every parameter's gradient (the next backward starts from nothing rather than from zeros).
  void zero_grad();

  double lr() const { return lr_; }
  void set_lr(double lr);  // e.g. from a schedule, before each step()
  int64_t steps_taken() const { return steps_; }  // how many times step() ran

  std::vector<Tensor> parameters() const;
  std::vector<NamedTensor> named_parameters() const;
  // Bytes of the per-parameter buffers held now (none before the first update): for memory reports.
  size_t state_bytes() const;

  // The optimizer's whole state as tensors, ready for a safetensors file:
  //   "step" (i64 scalar: steps_taken), "lr" (f64 scalar),
  //   "step.<param>" (i64 scalar: updates this parameter has received),
  //   "<buffer>.<param>" for each per-parameter buffer ("exp_avg.<param>", "momentum_buffer.<param>").
  // Parameters that never had a gradient have no entries. The tensors are copies.
  StateDict state_dict() const;
  // The parameter a state_dict() key belongs to ("exp_avg.blocks.0.attn.qkv.weight" ->
  // "blocks.0.attn.qkv.weight"); "" for the optimizer's own "step" and "lr". What lets a pipeline
  // rank keep, save and load only its own parameters' state.
  static std::string parameter_of_key(const std::string& key);
  // Restores a state_dict() of an optimizer of the same kind over parameters with the same names and
  // shapes. Checks everything before changing anything; unknown or missing keys are errors.
  void load_state_dict(const StateDict& state);

 protected:
  // What an optimizer keeps for one parameter.
  struct Slot {
    std::string name;
    Tensor param;
    std::optional<double> weight_decay;  // the group's override
    int64_t step = 0;                     // updates received so far (1-based during an update)
    std::map<std::string, Tensor> buffers;  // e.g. "exp_avg"; empty until the first update
  };

  // Checks the parameters (defined, floating-point, uniquely named, each listed once) and the rate.
  Optimizer(const char* name, std::vector<ParamGroup> groups, double lr);

  // Applies one update to `active` (the slots whose parameter has a gradient; their `step` already
  // counts this update).
  virtual void update(const std::vector<Slot*>& active) = 0;
  // The buffers a parameter's state must hold once it has been updated (checked by load_state_dict).
  virtual std::vector<std::string> buffer_names() const = 0;
  // Whether step() may run while a CUDA graph captures (the update reads its step-dependent values
  // from device memory, staged before each replay).
  virtual bool capturable() const { return false; }
  // One more step taken, by the optimizer and by each of `active` (what step() counts before update).
  void count_step(const std::vector<Slot*>& active);

  // Buffers are f32, or f64 for f64 parameters (bf16/f16 weights keep full-precision state).
  static DType state_dtype(const Tensor& param);
  // Throws "<name>: <what> must be a finite number >= 0, got <value>".
  void check_non_negative(const char* what, double value) const;

  std::vector<Slot> slots_;

 private:
  const char* name_;
  double lr_;
  int64_t steps_ = 0;
};

}  // namespace brigade::optim
