// The pipeline runtime: one training step of a pipelined model, on every rank.
//
//   Pipeline pipe(groups, schedule, my_chunks, loss_fn, options);
//   for (step...) {
//     StepStats st = pipe.forward_backward(microbatch_inputs, microbatch_targets);  // all ranks
//     pipe.clip_grad_norm(1.0);                                                     // global norm
//     optimizer.step(); optimizer.zero_grad();   // each rank steps its own parameters
//   }
//
// forward_backward() runs the schedule through the Executor (pipeline/executor.h), then makes the
// gradients those of the whole model:
//   - tied weights: the copies' gradients are summed across the ranks that hold them (pipeline/stage.h);
//   - data parallelism: with R replicas of the pipeline, each stage's gradients are averaged across
//     its R copies (one all-reduce per parameter over that stage's replica group);
// and reports the step's loss — the mean over micro-batches (and replicas) — on every rank.
//
// The ranks: a world of R * P ranks is split into R pipelines of P ranks (world rank = replica * P +
// pipeline rank). PipelineGroups::split() does it; a plain P-rank communicator is a group with R = 1.
//
// Every rank must call every method, in the same order: they communicate. A failure on one rank
// (an exception in a layer, a bad shape) aborts the communicators, so the others fail promptly with
// an error naming the rank instead of waiting for the timeout.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "pipeline/executor.h"
#include "pipeline/replica_buckets.h"
#include "pipeline/schedule.h"
#include "pipeline/stage.h"
#include "pipeline/trace.h"

namespace brigade::pipeline {

// The communicators of one rank: its pipeline (P ranks, one per pipeline rank) and its stage's
// replica group (R ranks; null or size 1 without data parallelism).
struct PipelineGroups {
  comm::Communicator* pipeline = nullptr;
  comm::Communicator* replicas = nullptr;
  int replica = 0;  // which pipeline this rank belongs to

  // Splits `world` (R * P ranks, R = world.size() / pipeline_ranks) into pipelines and replica groups.
  // Every rank of `world` calls it. Throws naming the sizes when world.size() is not a multiple of
  // pipeline_ranks. The returned object owns the split communicators.
  static std::shared_ptr<PipelineGroups> split(comm::Communicator& world, int pipeline_ranks);

  std::unique_ptr<comm::Communicator> owned_pipeline, owned_replicas;
};

struct PipelineOptions {
  bool recompute = false;        // activation recomputation on every stage (see ExecutorOptions)
  bool variable_shapes = false;  // micro-batches may differ in shape (e.g. sequence length)
  bool trace = false;            // record the step's timeline; last_trace() returns it
  std::vector<Tie> ties;
  std::vector<Skip> skips;
  // Data parallelism: gradients are averaged across replicas in buckets of up to this many bytes —
  // one all-reduce per bucket instead of one per parameter (PyTorch DDP's default size). 0: one
  // all-reduce per parameter. pipeline/replica_buckets.h.
  size_t bucket_bytes = size_t(25) << 20;
  // Start each chunk's all-reduces as soon as its gradients are final, during the backward, where the
  // transport can overlap them with compute (NCCL); false: all at the end of the step. Same bits.
  bool overlap_reduce = true;
};

struct StepStats {
  double loss = 0;                        // mean over micro-batches (and replicas); on every rank
  std::vector<double> microbatch_losses;  // this replica's, in micro-batch order; on every rank
  int peak_stashed = 0;                   // this rank's most (micro-batch, chunk) pairs held at once
  // Data parallelism: this rank's gradient all-reduces, and how many of them started inside the
  // step's schedule, each as its chunk's gradients became final (PipelineOptions::overlap_reduce, on
  // NCCL) rather than after it.
  int reductions = 0;
  int reductions_during_backward = 0;
};

class Pipeline {
 public:
  Pipeline(const PipelineGroups& groups, Schedule schedule, std::vector<Chunk> chunks, LossFn loss,
           PipelineOptions options = {});
  ~Pipeline();

  // One step's forward and backward: `inputs` and `targets` hold one tensor per micro-batch (the
  // rank holding stage 0 needs the inputs, the one holding the last stage the targets; others may
  // pass empty lists). Gradients accumulate into .grad — zero them between steps.
  StepStats forward_backward(const std::vector<Tensor>& inputs, const std::vector<Tensor>& targets);

  // ---- evaluation: forward only (pipeline/forward.cpp) ----
  // Both run `microbatches` micro-batches forward through the stages on forward_only_schedule() of
  // this pipeline's layout (any placement, any V), recording no tape and leaving weights and
  // gradients alone. Micro-batches may differ in shape (the last batch of a validation set, a
  // sequence growing while decoding). `inputs` as for forward_backward: needed on stage 0's rank.
  // Every rank of this pipeline calls them, with the same `microbatches`; replicas are independent
  // (one replica may evaluate while the others do not). A failure aborts the pipeline's
  // communicator, as in forward_backward.
  //
  // Each micro-batch's loss against `targets` (needed on the last stage's rank), on every rank.
  std::vector<double> forward_losses(int microbatches, const std::vector<Tensor>& inputs,
                                     const std::vector<Tensor>& targets);
  // The last stage's output for each micro-batch, passed through `keep` on the last stage's rank
  // (e.g. the last position's logits, for decoding: what travels is only what is kept), then
  // broadcast to every rank of the pipeline, in its dtype and shape — so every rank can take the
  // same next step (choose the same next token) without another message.
  std::vector<Tensor> forward_outputs(int microbatches, const std::vector<Tensor>& inputs,
                                      const std::function<Tensor(const Tensor&)>& keep = {});

  // Scales every gradient of the whole model so their joint L2 norm is at most max_norm, like
  // optim::clip_grad_norm on one device (each tied weight counted once). Returns the norm before
  // clipping, the same on every rank; a non-finite norm leaves the gradients untouched.
  double clip_grad_norm(double max_norm);

  // This rank's parameters, each once (a tied weight's copy included), named by "stage<s>." + the
  // layer index within the stage + the module's name: "stage2.0.attn.qkv.weight".
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<Tensor> parameters() const;

  // Turns tracing on or off for the next steps (every rank must agree: tracing adds a barrier and
  // a gather). last_trace(): the last traced step's timeline, every rank's events on every rank.
  void set_trace(bool on) { options_.trace = on; }
  const Trace& last_trace() const { return trace_; }

  const Schedule& schedule() const { return executor_->schedule(); }
  int rank() const { return groups_.pipeline->rank(); }
  int replica() const { return groups_.replica; }
  int replicas() const { return groups_.replicas ? groups_.replicas->size() : 1; }

 private:
  struct TieGroup;
  // The constructor's steps (runtime.cpp), in their order.
  void check_fits(const Schedule& schedule, const std::vector<Chunk>& chunks) const;
  void build_tie_groups(const Layout& layout, const std::vector<Chunk>& chunks);
  void build_replica_buckets();
  void connect_collectives();
  void sum_tied_gradients();
  void gather_trace(const Trace& mine);
  Executor& forward_executor(int microbatches);  // built on first use, one per M
  std::vector<Tensor> run_forward(int microbatches, const std::vector<Tensor>& inputs,
                                  const std::vector<Tensor>& targets, const std::function<Tensor(const Tensor&)>& keep);

  PipelineGroups groups_;
  std::unique_ptr<Executor> executor_;
  std::map<int, std::unique_ptr<Executor>> forward_executors_;  // by M
  PipelineOptions options_;
  LossFn loss_;
  std::vector<std::unique_ptr<TieGroup>> ties_;
  std::unique_ptr<ReplicaBuckets> buckets_;  // with several replicas
  Trace trace_;
  bool warned_no_host_copy_ = false;
};

// Splits a batch [B, ...] into `microbatches` equal parts along dim 0 (views, no copies). Throws
// naming B and M when B is not a multiple of M.
std::vector<Tensor> split_microbatches(const Tensor& batch, int microbatches);

// How a step weighs its M micro-batches: each one's backward is seeded with microbatch_loss_scale(M)
// (1/M), so the gradients summed over the micro-batches are those of the batch's mean loss, and the
// step's loss is step_loss(the micro-batches' losses, in order). One-device gradient accumulation
// (`brigade train --stages 0 --microbatches M`) uses both too, to compute a pipeline's numbers exactly.
double microbatch_loss_scale(int microbatches);
double step_loss(const std::vector<double>& microbatch_losses);

}  // namespace brigade::pipeline
