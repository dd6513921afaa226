// The trainer behind `brigade train`: a GPT, AdamW, and a task (task.h: the sort task, or language
// modelling on token shards), one step at a time.
//
// Everything a step depends on is a function of (options, step number, data position): the batch is
// rows [position, position + batch) of the task's seeded stream, the learning rate is
// schedule.lr(step), and there is no dropout. So a checkpoint needs only the model, the optimizer
// state, the step count and the position, and a resumed run computes bit for bit what the
// uninterrupted run would have.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "evaluate.h"
#include "nn/checkpoint.h"
#include "nn/gpt.h"
#include "optim/adamw.h"
#include "pipeline/analysis/plan_memory.h"
#include "pipeline/partition.h"
#include "pipeline/runtime.h"
#include "optim/schedule.h"
#include "options.h"
#include "sort_task.h"
#include "task.h"

namespace brigade::train {

// What one pipeline layer's parameters take on the run's device, as its allocator rounds each tensor:
// the parameters, their gradients and AdamW's two f32 moments (the memory report's sizes); and
// their elements and bytes as they are (what the report says each rank trains).
struct LayerBytes {
  int64_t parameters = 0, gradients = 0, optimizer = 0;
  int64_t elements = 0, nbytes = 0;
};

// One trainer per rank. Without groups it is the whole model on one device; with them, one rank of
// a pipeline (pipeline/runtime.h): every rank builds only its stages' layers (nn::GPT holding some
// layers, pipeline::gpt_rank_model), whose parameters keep the whole model's names and initial
// values (each drawn by the seed and its name), and its optimizer updates those. A checkpoint is a
// directory of shards, each rank writing its own parameters by their full names
// (nn/sharded_checkpoint.h), so any layout resumes it. Evaluation runs through the stages
// (pipeline_eval.h): no rank assembles the model.
class Trainer {
 public:
  // Builds the model and the optimizer; with options.resume, restores that checkpoint, and else with
  // a --save directory, its newest checkpoint that loads (checkpoint_dir.h; in a pipeline, world
  // rank 0 picks it and every rank loads that file). Throws brigade::Error when the checkpoint can't
  // be read or belongs to a different configuration. options.device is taken as it is: whether it
  // can be used here is run_training's question (cli::usable_device), asked once.
  explicit Trainer(const TrainOptions& options, const pipeline::PipelineGroups* groups = nullptr);
  ~Trainer();

  // One optimizer step on the next batch; returns that batch's loss (before the update; in a
  // pipeline the mean over micro-batches and replicas, on every rank).
  double train_step();
  // Writes model, optimizer state and progress to the checkpoint directory `path` (sharded_save.h:
  // atomic as a whole, the index last). In a pipeline every rank calls it, and each rank of replica
  // 0 writes its own parameters; a rank that fails makes it fail on every rank.
  void save(const std::string& path);
  // Greedy-decoding accuracy of the whole model on the sort task. In a pipeline every rank calls it;
  // the ranks of replica 0 decode through the stages (forward-only passes, pipeline_eval.h: the model
  // is never assembled on one rank), the leader returns the result and the others an empty Accuracy.
  Accuracy evaluate(int64_t examples);
  // Mean loss of the whole model on the first `windows` validation windows (--data with validation
  // shards), in the same way: every rank calls it, the leader's result is the one that counts (NaN
  // elsewhere). Equal to the one-device number, bit for bit on the CPU.
  double validation_loss(int64_t windows);
  // `tokens` tokens the whole model writes from the start of a new document (temperature 0.8, top-k
  // 40, `seed`), decoded by the data's tokenizer, in the same way: the leader's result, "" on the
  // other ranks.
  std::string sample(int64_t tokens, uint64_t seed);

  // Pipeline only: trace the next steps (pipeline/trace.h); the last traced step's timeline.
  void set_trace(bool on);
  const pipeline::Trace& last_trace() const;
  const pipeline::Schedule& schedule() const;
  const pipeline::Partition& partition() const { return partition_; }
  // How many layers the partition cuts: the GPT's blocks whole, or in halves with --partition balanced.
  int64_t layer_count() const { return layer_count_; }
  // The partition as a table (pipeline::describe_partition), made on world rank 0 ("" elsewhere).
  const std::string& partition_table() const { return partition_table_; }
  // Each layer's parameter bytes (the head's include the tied token table, as its stage holds a
  // copy), and the tied table's alone, made on world rank 0 (empty elsewhere).
  const std::vector<LayerBytes>& layer_bytes() const { return layer_bytes_; }
  const LayerBytes& tied_bytes() const { return tied_bytes_; }
  // How the layers were cut (balanced, layers, params or time: --partition, with auto resolved) and why.
  pipeline::PartitionMethod partition_method() const { return partition_method_; }
  const std::string& partition_reason() const { return partition_reason_; }
  bool pipelined() const { return pipe_ != nullptr; }
  // Prints (and writes) on this rank: world rank 0, or the only rank.
  bool is_leader() const;

  int64_t step() const { return step_; }  // steps done so far
  int64_t data_position() const { return position_; }  // rows of the training stream consumed so far
  double first_loss() const { return first_loss_; }  // loss of step 1 (NaN before it; kept on resume)
  double lr_at(int64_t step) const { return schedule_.lr(step); }
  // Settings that differ from the resumed checkpoint's (allowed, but the run is no longer identical
  // to the original one), as "--lr: 0.003 in the checkpoint, now 0.001".
  const std::vector<std::string>& resume_notes() const { return resume_notes_; }
  // The checkpoint this run continues ("" when it started at step 0), and, from a --save directory,
  // the damaged checkpoints passed over on the way to it (world rank 0 only).
  const std::string& resumed_from() const { return resumed_from_; }
  const std::vector<std::string>& resume_warnings() const { return resume_warnings_; }

  const TrainOptions& options() const { return options_; }
  const Task& task() const { return *task_; }
  nn::GPT& model() { return *model_; }
  optim::AdamW& optimizer() { return *optimizer_; }
  // Null on a rank whose stages hold no parameters (more stages than layers): nothing to update.
  const optim::AdamW* optimizer_if_any() const { return optimizer_.get(); }

 private:
  void resume(const std::string& path);         // --resume PATH
  // This rank's parameters and their optimizer state from the checkpoint at `path`: from a sharded
  // one only those, from a single file all of it.
  nn::Checkpoint load_own_part(const std::string& path);
  void init_from(const std::string& path);      // --init-from PATH: the weights only
  bool evaluates_here() const;  // evaluation runs on this rank: one device, or replica 0's pipeline
  // Loads `state` into model_: every tensor model_ holds must be there; in a pipeline, the tensors of
  // the layers other ranks hold are passed over.
  void load_model_state(const nn::StateDict& state);
  void resume_newest(const std::string& dir);   // --save DIR/
  // Checks that `ckpt` belongs to this configuration and loads it; errors start with `context`.
  void restore(const nn::Checkpoint& ckpt, const std::string& context);
  int64_t leaders_value(int64_t value);  // world rank 0's `value`, on every rank
  pipeline::PartitionMethod resolve_partition(const nn::GPTConfig& config);  // --partition auto -> balanced or layers
  pipeline::Partition choose_partition(const pipeline::Schedule& schedule);  // by partition_method_
  // --partition balanced: measured time per layer, memory as `brigade plan` estimates it
  // (pipeline/analysis/plan_memory.h), within options_.memory_budget.
  pipeline::Partition balanced_partition(const pipeline::Schedule& schedule);
  pipeline::PlannedPipeline planned_pipeline(const pipeline::Schedule& schedule) const;
  // Each layer's forward + backward seconds (with `recompute`, one more forward), measured by world
  // rank 0 on one micro-batch (on sample_layers_); every rank gets its numbers.
  std::vector<double> shared_layer_seconds(bool recompute);
  DType compute_dtype() const;                            // what --precision resolved to
  bool owns(const Tensor& parameter) const;  // held by this rank's stages

  TrainOptions options_;
  std::unique_ptr<Task> task_;
  nn::GPTConfig config_;  // the whole model's
  std::shared_ptr<nn::GPT> model_;
  std::unique_ptr<optim::AdamW> optimizer_;
  optim::CosineSchedule schedule_;
  const pipeline::PipelineGroups* groups_;
  pipeline::PartitionMethod partition_method_ = pipeline::PartitionMethod::layers;
  std::string partition_reason_;
  int64_t layer_count_ = 0;
  // While the constructor chooses the partition, on world rank 0: one entry per layer, from a small
  // GPT holding the embedding, block 0 and the head — every block is that block (the blocks are alike
  // in shapes, parameters and work). For measuring and describing layers without the whole model.
  pipeline::Layers sample_layers_;
  std::string partition_table_;
  std::vector<LayerBytes> layer_bytes_;
  LayerBytes tied_bytes_;
  pipeline::Partition partition_;
  std::unique_ptr<pipeline::Pipeline> pipe_;
  int64_t step_ = 0;
  int64_t position_ = 0;
  double first_loss_;
  std::vector<std::string> resume_notes_;
  std::string resumed_from_;
  std::vector<std::string> resume_warnings_;
};

struct TrainSummary {
  int64_t steps = 0;      // steps done in the whole run, including before a resume
  double first_loss = 0;  // step 1
  double last_loss = 0;   // mean of the last 10 steps (NaN when this run did no steps)
  Accuracy accuracy;  // the sort task's (none with --data)
  // --data with validation shards: (step, validation loss), first before any step of this run.
  std::vector<std::pair<int64_t, double>> validation;
};

// The whole `brigade train` run: train, log progress to `out`, checkpoint, evaluate, report.
TrainSummary run_training(const TrainOptions& options, std::ostream& out);

}  // namespace brigade::train
