// One pipeline step of a tiny GPT on the given ranks, and what every rank computed. The equality
// grids run it twice — on a reference transport (local threads) and on the one under test (gloo
// processes' threads, NCCL ranks) — and require the same losses and gradients, bit for bit.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "brigade.h"
#include "kernels/ops.h"
#include "comm/thread_ranks.h"

namespace test {

using namespace brigade;

struct StepResult {
  std::vector<double> losses;
  std::map<std::string, std::vector<double>> grads;  // "name@rank"
  std::vector<std::string> errors;                   // per rank; empty: it finished
  std::vector<int> reductions, reductions_during_backward;  // per rank (data parallelism)
};

// The schedules an equality grid runs, on 2 .. max_P ranks: every kind with one chunk per rank and
// M = 1, P, 2P + 1, interleaved with two chunks and M = P, 2P, zb-v (two chunks in a V) with
// M = 1, 2P, 2P + 1, and dualpipev with M = 2P, 2P + 1.
struct GridPoint {
  pipeline::ScheduleKind kind;
  int P, M, V;
};
inline std::vector<GridPoint> schedule_grid(int max_P) {
  using pipeline::ScheduleKind;
  std::vector<GridPoint> grid;
  for (ScheduleKind kind : {ScheduleKind::naive, ScheduleKind::gpipe, ScheduleKind::one_f_one_b, ScheduleKind::zb_h1})
    for (int P = 2; P <= max_P; ++P)
      for (int M : {1, P, 2 * P + 1}) grid.push_back({kind, P, M, 1});
  for (int P = 2; P <= max_P; ++P)
    for (int M : {P, 2 * P}) grid.push_back({ScheduleKind::interleaved, P, M, 2});
  for (int P = 2; P <= max_P; ++P)
    for (int M : {1, 2 * P, 2 * P + 1}) grid.push_back({ScheduleKind::zb_v, P, M, 2});
  for (int P = 2; P <= max_P; ++P)
    for (int M : {2 * P, 2 * P + 1}) grid.push_back({ScheduleKind::dualpipev, P, M, 2});
  return grid;
}

// The GPT every pipeline step test runs: 3 blocks, small enough for the emulator.
inline nn::GPTConfig tiny_gpt_config() {
  nn::GPTConfig config{.vocab_size = 11, .block_size = 8, .n_layer = 3, .n_head = 2, .n_embd = 8, .seed = 5};
  return config;
}

// Each rank's model and data live on its communicator's device. On a GPU each rank thread runs on a
// stream of its own, as `brigade train` does, so the transports' stream ordering is exercised too.
// With `replicas` > 1 the ranks form that many pipelines (PipelineGroups::split), replica k running
// its own micro-batches, and gradients are averaged across replicas (`overlap`: during the backward
// where the transport can).
inline StepResult pipeline_step(std::vector<std::unique_ptr<comm::Communicator>>& comms, pipeline::ScheduleKind kind,
                                int M, int V, bool varying, int replicas = 1, bool overlap = true) {
  nn::GPTConfig config = tiny_gpt_config();
  const int P = int(comms.size()) / replicas;
  const pipeline::Schedule schedule = pipeline::make_schedule(kind, P, M, V);
  const pipeline::Partition partition = pipeline::partition_uniform(config.n_layer + 2, int64_t(P) * V);
  std::vector<Tensor> inputs, targets;  // replica k's are [k * M, (k + 1) * M)
  for (int m = 0; m < M * replicas; ++m) {
    const int64_t T = varying ? 3 + m % 4 : 6;  // sequence lengths differ between micro-batches
    Generator gen(uint64_t(100 + m));
    inputs.push_back(ops::to_dtype(uniform({2, T}, 0, 10.999, DType::f64, Device::cpu(), &gen), DType::i64));
    targets.push_back(ops::to_dtype(uniform({2, T}, 0, 10.999, DType::f64, Device::cpu(), &gen), DType::i64));
  }
  StepResult out;
  out.reductions.assign(comms.size(), 0);
  out.reductions_during_backward.assign(comms.size(), 0);
  std::mutex mutex;
  out.errors = run_ranks(comms, [&](comm::Communicator& comm) {
    const Device device = comm.device();
    std::shared_ptr<pipeline::PipelineGroups> split;
    pipeline::PipelineGroups groups;
    groups.pipeline = &comm;
    if (replicas > 1) {
      split = pipeline::PipelineGroups::split(comm, P);
      groups.pipeline = split->pipeline;
      groups.replicas = split->replicas;
      groups.replica = split->replica;
    }
    comm::Communicator& line = *groups.pipeline;
    std::vector<Tensor> my_inputs, my_targets;  // copied on this rank's stream
    for (int m = 0; m < M; ++m) {
      my_inputs.push_back(inputs[size_t(groups.replica * M + m)].to(device));
      my_targets.push_back(targets[size_t(groups.replica * M + m)].to(device));
    }
    nn::GPTConfig my_config = config;
    my_config.device = device;
    // Only this rank's layers (drawn by name: the whole model's values there).
    const std::shared_ptr<nn::GPT> model_ptr =
        pipeline::gpt_rank_model(my_config, partition, schedule.layout, line.rank());
    nn::GPT& model = *model_ptr;
    pipeline::GptStages mine = pipeline::gpt_stages(model, partition, schedule.layout, line.rank());
    pipeline::PipelineOptions options;
    options.ties = mine.ties;
    options.variable_shapes = varying;
    options.overlap_reduce = overlap;
    options.bucket_bytes = 600;  // several buckets per chunk, some of one gradient
    pipeline::Pipeline pipe(groups, schedule, mine.chunks, mine.loss, options);
    pipeline::StepStats stats = pipe.forward_backward(my_inputs, my_targets);
    std::lock_guard<std::mutex> lock(mutex);
    if (comm.rank() == 0) out.losses = stats.microbatch_losses;
    out.reductions[size_t(comm.rank())] = stats.reductions;
    out.reductions_during_backward[size_t(comm.rank())] = stats.reductions_during_backward;
    for (auto& [name, p] : model.named_parameters())
      if (p.grad().defined()) out.grads[name + "@" + std::to_string(comm.rank())] = p.grad().to_vector();
  }, /*own_streams=*/true);
  return out;
}

}  // namespace test
