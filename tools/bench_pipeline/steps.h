// Running the steps the benchmark measures: a GPT pipelined over P threads, and the same GPT on one
// device with the same micro-batches run one after another.
//
// Both time forward + backward of one whole batch (gradients dropped between steps, as an optimizer
// would zero them), from a common start — a barrier for the pipeline — to the moment the last of the
// work is done: on a GPU after synchronising the stream that ran it, so a step's time is the GPU's.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "nn/gpt.h"
#include "pipeline/schedule.h"
#include "pipeline/trace.h"

namespace brigade::bench_pipeline {

// The model and one batch of data, already on the model's device and cut into micro-batches.
struct Workload {
  nn::GPTConfig model;
  std::vector<Tensor> inputs, targets;  // one [batch / M, seq] tensor each per micro-batch
  int64_t tokens_per_step = 0;          // batch x seq
};

// Random token ids (a fixed hash, so every run sees the same data); `batch` must be a multiple of
// `microbatches`.
Workload make_workload(const nn::GPTConfig& model, int64_t batch, int64_t seq, int microbatches);

struct PipelinedSteps {
  std::vector<double> seconds;          // per timed step: the slowest rank's wall time
  std::vector<pipeline::Trace> traces;  // per timed step: every rank's events
  std::vector<int> peak_stashed;        // per rank: most micro-batch activations held at once
  int reductions = 0;                   // data parallelism, the last step, summed over the ranks:
  int reductions_during_backward = 0;   //   all-reduces, and those started before the step's end
  double loss = 0;                      // the last step's mean loss
};

// How the ranks are connected: `replicas` copies of the pipeline averaging their gradients
// (PipelineOptions::overlap_reduce = `overlap`), over local communicators or NCCL.
struct Ranks {
  int replicas = 1;
  bool nccl = false;
  bool overlap = true;
};

// `warmup` untimed steps, then `steps` timed ones, of `schedule` on replicas x schedule.ranks()
// threads. On a GPU every rank thread runs on a stream of its own (local ranks all on the workload's
// GPU, NCCL ranks on the GPUs in turn from it). Throws an Error naming the schedule and the rank(s)
// that failed.
PipelinedSteps run_pipelined(const pipeline::Schedule& schedule, const Workload& work, int warmup, int steps,
                             const Ranks& ranks = {});

struct UnpipelinedSteps {
  std::vector<double> seconds;  // per timed step
  double loss = 0;              // the last step's mean loss, comparable with the pipeline's
  int64_t parameters = 0;       // of the whole model
};

// The reference: the whole model on the calling thread, every micro-batch's backward seeded with 1/M
// (exactly the gradient a pipeline step computes).
UnpipelinedSteps run_unpipelined(const Workload& work, int warmup, int steps);

}  // namespace brigade::bench_pipeline
