// The executor: runs one rank's part of a schedule with real tensors, for one training step.
//
// It walks the rank's action list (pipeline/schedule.h) in order:
//
//   F(m, c)   takes the input of stage s = layout.stage(rank, c) for micro-batch m (the batch data on
//             stage 0, else what arrived from stage s-1), makes it a fresh leaf, and runs the chunk's
//             layers on a tape of its own — one tape per micro-batch in flight, so backwards can run in
//             any order. The last stage applies the loss. With recomputation the forward runs without a
//             tape and only the input is kept.
//   B(m, c)   replays that tape from the output gradient (1/M on the last stage: the gradient of a mean
//             over micro-batches), which accumulates the chunk's weight gradients and yields the input
//             gradient for stage s-1; then the tape and everything it kept are dropped.
//   I / W     the same backward in two halves (zero-bubble): I the input gradient, W the weights later.
//   messages  every maximal run of SEND/RECV actions is one Communicator::exchange
//             (pipeline/exchange.h explains why that cannot deadlock).
//
// A message is a *bundle*: the stage's output plus every skip tensor (pipeline/stage.h) crossing that
// stage boundary. A gradient bundle holds the gradients of the floating-point entries only. When
// neighbouring stages live on the same rank (P = 1; the turn of zb-v's V), bundles are handed over in
// memory.
//
// On a GPU the executor runs everything on the stream that is current when run() is called (the
// caller — brigade train, bench pipeline — gives each rank's thread its own); nothing synchronises the device.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "pipeline/schedule.h"
#include "pipeline/stage.h"
#include "pipeline/trace.h"

namespace brigade::pipeline {

struct ExecutorOptions {
  bool recompute = false;        // keep only each stage's input; redo its forward before the backward
  bool variable_shapes = false;  // messages may change shape from one micro-batch to the next
  std::vector<Skip> skips;       // every skip connection of the model (the same list on every rank)
  // Connect every link the schedule sends on before the first step (Communicator::connect), in the
  // constructor: a collective, so every rank must construct its executor. Off only to show what
  // happens on NCCL without it (tests/gpu/test_gpu_comm.cpp): links set up at first use can wait in
  // a cycle.
  bool connect_links = true;
  // Added to every message tag. A channel (peer, tag) keeps one kind, fixed-shape or varying
  // (comm/handshake.h), so two executors on one communicator whose shapes differ in kind — training
  // and the forward-only pass (pipeline/forward.cpp) — must not share tags.
  int tag_base = 0;
};

class Executor {
 public:
  // `comm` connects the schedule's P ranks (comm.rank() is this rank); `chunks` are this rank's V
  // chunks. Checks the schedule against the communicator and the chunks against the skips, then
  // connects the schedule's links (ExecutorOptions::connect_links).
  Executor(comm::Communicator& comm, Schedule schedule, std::vector<Chunk> chunks, LossFn loss,
           ExecutorOptions options = {});
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Runs the rank's actions once. `inputs` (read only on the rank holding stage 0) and `targets` (only
  // on the rank holding the last stage) hold one tensor per micro-batch; other ranks may pass empty
  // lists. The loss of every micro-batch is seeded with gradient `loss_scale` (1/M for the mean over
  // micro-batches). Gradients accumulate into the parameters' .grad. Returns each micro-batch's loss on
  // the last stage's rank, an empty list elsewhere. With `trace`, records each action's start and end
  // and appends this rank's events to *trace.
  // Any failure leaves the executor ready for another run (its state is cleared).
  std::vector<double> run(const std::vector<Tensor>& inputs, const std::vector<Tensor>& targets, double loss_scale,
                          Trace* trace = nullptr);
  // For a forward-only schedule (Schedule::forward_only, evaluation): runs the rank's actions with
  // no tape, keeping nothing once a stage's output has left. On the last stage's rank returns one
  // tensor per micro-batch — with `targets`, the loss against them ([1]); without, the last stage's
  // output passed through `keep` (all of it when `keep` is empty) — and an empty list elsewhere.
  std::vector<Tensor> run_forward(const std::vector<Tensor>& inputs, const std::vector<Tensor>& targets,
                                  const std::function<Tensor(const Tensor&)>& keep, Trace* trace = nullptr);

  // `hook(c)` runs on the calling thread right after the action that makes chunk c's weight
  // gradients final for the step (its last B or W), so their data-parallel reduction can start while
  // the rest of the step computes; weights_final_order() lists the chunks in that order. A chunk
  // with no backward is reported at the end of run().
  void on_weights_final(std::function<void(int chunk)> hook) { on_weights_final_ = std::move(hook); }
  std::vector<int> weights_final_order() const;

  const Schedule& schedule() const { return schedule_; }
  const std::vector<Chunk>& chunks() const { return chunks_; }
  // Micro-batches whose activations this rank holds right now, and the most it held during the
  // last run (counting each (micro-batch, chunk) pair; compare SimulationResult's per-rank peak).
  int stashed() const;
  int peak_stashed() const { return peak_stashed_; }

 private:
  struct Bundle;
  struct Work;
  using Key = std::pair<int, int>;  // (global stage, micro-batch)

  void forward(const Action& a);
  void backward(const Action& a);  // B and I
  void backward_weight(const Action& a);
  void exchange(const std::vector<Action>& messages);
  Bundle run_layers(int stage, Work& work, int microbatch);
  std::vector<const Skip*> skips_over(int boundary) const;  // the skips crossing boundary s | s+1
  int tag(int boundary, bool gradient, size_t slot) const;
  Work& work_at(const Key& key, const Action& a);
  void clear();
  void walk(const std::vector<Tensor>& inputs, const std::vector<Tensor>& targets, Trace* trace);

  comm::Communicator& comm_;
  Schedule schedule_;
  std::vector<Chunk> chunks_;
  LossFn loss_;
  ExecutorOptions options_;
  int rank_;

  // Per-run state.
  const std::vector<Tensor>* inputs_ = nullptr;
  const std::vector<Tensor>* targets_ = nullptr;
  double loss_scale_ = 1;
  // The last stage's result per micro-batch, on the device: the loss ([1]), or in a forward-only run
  // without targets the output through keep_.
  std::vector<Tensor> losses_;
  bool forward_only_ = false;  // the schedule runs no backward
  bool with_loss_ = true;      // the last stage applies the loss (always, but in run_forward without targets)
  std::function<Tensor(const Tensor&)> keep_;
  std::map<Key, std::unique_ptr<Work>> work_;     // F done, backward not finished
  std::map<Key, std::shared_ptr<Bundle>> arrived_;       // activations for (stage, m), received or handed over
  std::map<Key, std::shared_ptr<Bundle>> arrived_grads_;  // gradients of (stage, m)'s output
  std::map<Key, std::shared_ptr<Bundle>> outgoing_;      // activations to send, by (sending stage, m)
  std::map<Key, std::shared_ptr<Bundle>> outgoing_grads_;  // input gradients to send, by (sending stage, m)
  int peak_stashed_ = 0;
  static constexpr size_t kNever = size_t(-1);
  std::vector<size_t> last_weight_action_;  // per chunk: index in this rank's actions, or kNever
  std::function<void(int)> on_weights_final_;
};

}  // namespace brigade::pipeline
