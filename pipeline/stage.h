// What one rank runs of a pipelined model: its chunks, the weights it shares with other stages, and
// the tensors that skip over stages.
//
// A model for the pipeline is an ordered list of one-tensor-in, one-tensor-out layers, cut into
// S = P * V stages (pipeline/partition.h). Rank r holds V chunks; chunk c is global stage c * P + r
// (interleaved), or, in the V of zb-v and dualpipev, stages r and 2P-1-r (pipeline/action.h's Layout
// says which). Every rank — a thread or a process — builds only its chunks' layers (for a GPT,
// pipeline::gpt_rank_model; for a model of your own, build_rank_chunks: pipeline/gpt_stages.h), each
// drawn so that it starts as the whole model would (by name: nn/init.h's Init::keyed).
//
// Tied weights. GPT's token embedding (stage 0) is also its output projection (the head, stage S-1).
// On one device that is one tensor whose gradient sums both uses. In a pipeline each of the two
// stages holds a copy; a Tie names the stages that share it, every chunk of those stages lists its
// copy under the tie's name, and after the backward the runtime sums the copies' gradients across
// their ranks. Both copies then take the same optimizer step and stay equal.
//
// Skip connections. A layer on stage `from` may stash a tensor under a name and a layer on a later
// stage `to` pop it (torchgpipe's stash/pop):
//
//   Tensor forward(const Tensor& x) override {   // on stage 1
//     pipeline::stash("early", x);
//     ...
//   }
//   Tensor forward(const Tensor& h) override {   // on stage 3
//     return h + pipeline::pop("early");
//   }
//
// The runtime carries the stashed tensor forward with the activations of every stage boundary it
// crosses, and its gradient back with theirs, so the gradient equals the one-device model's. Run on
// one device, the same layers need a SkipScope around the forward (the stash lives there).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "pipeline/partition.h"

namespace brigade::pipeline {

// A weight shared by several stages; every rank describes the same ties, in the same order.
struct Tie {
  std::string name;
  std::vector<int> stages;  // the global stages holding a copy (at least two)
};

// A tensor stashed on stage `from` under `name` and popped on stage `to` (from < to).
struct Skip {
  std::string name;
  int from = 0;
  int to = 0;
};

// One of a rank's chunks: a global stage's layers, in order.
struct Chunk {
  Layers layers;                       // may be empty: the stage passes its input through
  std::map<std::string, Tensor> tied;  // this stage's copy of each tie it takes part in, by tie name
};

// The last stage's loss: the model's output for one micro-batch and that micro-batch's targets ->
// a scalar, the mean loss over the micro-batch (e.g. cross-entropy over its tokens).
using LossFn = std::function<Tensor(const Tensor& output, const Tensor& targets)>;

// ---- skip connections (see above) ----

// Stashes `t` under `name` for a later layer. Throws unless a SkipScope (or the pipeline runtime,
// which opens one per forward) is active on this thread, or when `name` is already stashed.
void stash(const std::string& name, const Tensor& t);
// Takes the tensor stashed under `name` (once). Throws, listing what is available, when there is none.
Tensor pop(const std::string& name);

// Makes stash() and pop() work on this thread for its lifetime: stash puts a tensor in, pop takes it
// out. Scopes nest (the innermost one is used). The runtime pre-fills a scope with the skips that
// arrived from earlier stages and reads back what was stashed.
class SkipScope {
 public:
  SkipScope();
  ~SkipScope();
  SkipScope(const SkipScope&) = delete;
  SkipScope& operator=(const SkipScope&) = delete;

  void put(const std::string& name, const Tensor& t);  // as stash(), from outside the layers
  // Takes `name` out if present (an undefined tensor otherwise).
  Tensor take(const std::string& name);
  bool has(const std::string& name) const;
  std::vector<std::string> names() const;  // what is stashed and not yet popped, sorted

 private:
  std::map<std::string, Tensor> stashed_;
  SkipScope* previous_;
};

}  // namespace brigade::pipeline
