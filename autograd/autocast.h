// Mixed precision applied by the framework: inside an Autocast scope, the differentiable functions
// take their f32 inputs in the scope's dtype — parameters and activations alike — through the
// differentiable to_dtype, so a layer's forward needs no casts of its own:
//
//   Autocast bf16(DType::bf16);              // this thread, until the end of the block
//   Tensor y = linear(x, weight, bias);      // f32 weight and bias are used in bf16; y is bf16
//
// and the gradients come back to the f32 parameters in f32 (to_dtype's backward converts them), where
// they also accumulate across micro-batches. nn::Module::set_compute_dtype(dtype) is the same scope,
// opened by the module's operator() around its forward.
//
// What is converted, and what is not (PyTorch autocast's idea, with brigade's choice for mixed
// operands):
//   - only f32 tensors: f64 ones (gradcheck's) and integers pass untouched, as do tensors already in
//     a 16-bit dtype;
//   - the functions that do the arithmetic worth doing in 16 bits convert every f32 input: matmul,
//     linear, conv2d, layer_norm and rms_norm (parameters included), and embedding its output rows;
//   - binary elementwise ops (add, sub, mul, div) and concat convert an f32 operand when another
//     operand is 16-bit — the activation's dtype wins, so `h * scale` stays bf16 — and leave two f32
//     operands in f32;
//   - everything else keeps its input's dtype: unary and scalar ops, softmax, log_softmax, dropout,
//     pooling, views and split, and to_dtype, sum, mean and max, so a loss and whatever is computed
//     from it in f32 stay f32. cross_entropy reads 16-bit logits as they are and returns an f32 loss
//     (no f32 copy of the logits needed).
// The backward pass runs with no scope: backward functions use the dtypes the forward recorded. A
// recompute (activation checkpointing, the pipeline's --recompute) must run under the same scope as
// the forward did; the pipeline does this by calling the stage's module, whose compute dtype opens it.
#pragma once

#include <optional>
#include <vector>

#include "core/tensor.h"

namespace brigade {

class Autocast {
 public:
  // A floating dtype to compute in; std::nullopt (or f32) turns autocast off inside the scope.
  // Scopes nest: the innermost one holds until it ends, then the outer one is back.
  explicit Autocast(std::optional<DType> dtype);
  ~Autocast();
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  std::optional<DType> outer_;
};

// The calling thread's autocast dtype: the innermost scope's, or none.
std::optional<DType> autocast_dtype();

// x in the autocast dtype when a scope is active and x is f32; x itself otherwise. The differentiable
// functions call this on their inputs; a custom differentiable op can too.
Tensor autocast(const Tensor& x);
// x converted the same way, but only when `other` is in a 16-bit dtype (the mixed-operand rule).
Tensor autocast_to_match(const Tensor& x, const Tensor& other);

}  // namespace brigade
