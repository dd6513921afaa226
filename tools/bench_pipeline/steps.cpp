#include "bench_pipeline/steps.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <string>

#include "autograd/tape.h"
#include "comm/local.h"
#include "comm/local_ranks.h"
#include "comm/nccl.h"
#include "core/error.h"
#include "core/factory.h"
#include "core/stream.h"
#include "pipeline/gpt_stages.h"
#include "pipeline/runtime.h"

namespace brigade::bench_pipeline {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Token ids in [0, vocab) from a counter hash (splitmix64): the same batch on every run.
Tensor random_tokens(int64_t rows, int64_t cols, int64_t vocab, uint64_t seed) {
  Tensor out = zeros({rows, cols}, DType::i64);
  int64_t* d = out.data<int64_t>();
  uint64_t x = seed;
  for (int64_t i = 0; i < rows * cols; ++i) {
    uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    d[i] = int64_t((z ^ (z >> 31)) % uint64_t(vocab));
  }
  return out;
}

// On a GPU, a stream of the calling thread's own for as long as it lives; nothing on the CPU.
class OwnStream {
 public:
  explicit OwnStream(Device device) {
    if (!device.is_cuda()) return;
    stream_ = Stream::create(device);
    guard_.emplace(stream_);
  }
  // Blocks until the work queued on the stream is done (a no-op on the CPU).
  void synchronize() const {
    if (stream_.defined()) stream_.synchronize();
  }

 private:
  Stream stream_;
  std::optional<StreamGuard> guard_;
};

}  // namespace

Workload make_workload(const nn::GPTConfig& model, int64_t batch, int64_t seq, int microbatches) {
  Workload w;
  w.model = model;
  w.model.block_size = std::max(model.block_size, seq);
  w.tokens_per_step = batch * seq;
  // Targets are other random tokens: what is learned does not matter, only the work a step does.
  const Tensor inputs = random_tokens(batch, seq, model.vocab_size, 1).to(model.device);
  const Tensor targets = random_tokens(batch, seq, model.vocab_size, 2).to(model.device);
  w.inputs = pipeline::split_microbatches(inputs, microbatches);
  w.targets = pipeline::split_microbatches(targets, microbatches);
  // The rank threads read the batch from their own streams: it must be complete before they start.
  if (model.device.is_cuda()) device_synchronize(model.device);
  return w;
}

PipelinedSteps run_pipelined(const pipeline::Schedule& schedule, const Workload& work, int warmup, int steps,
                             const Ranks& layout) {
  const int P = schedule.ranks() * layout.replicas;  // every rank of the world
  const Device device = work.model.device;
  std::vector<std::unique_ptr<comm::Communicator>> comms;
  if (layout.nccl) {
    BRIGADE_CHECK(device.is_cuda(), "bench pipeline: NCCL ranks need a GPU workload, not ", device.str());
    std::vector<Device> devices;
    for (int r = 0; r < P; ++r) devices.push_back(Device::cuda((device.index + r) % cuda_device_count()));
    comms = comm::nccl_group(devices, std::chrono::seconds(120));
  } else {
    // One GPU: every rank on it, each with its own stream (run_local_ranks below).
    comms = device.is_cuda() ? comm::local_group(std::vector<Device>(size_t(P), device)) : comm::local_group(P);
  }
  const pipeline::Partition partition = pipeline::partition_uniform(work.model.n_layer + 2, schedule.stages());

  PipelinedSteps out;
  out.traces.resize(size_t(steps));
  out.peak_stashed.assign(size_t(schedule.ranks()), 0);
  const size_t ranks = static_cast<size_t>(P);
  std::vector<std::vector<double>> seconds(ranks, std::vector<double>(static_cast<size_t>(steps)));
  std::vector<int> reductions(ranks, 0), early(ranks, 0);

  // Each rank on a thread of its own, on a GPU with a stream of its own (comm/local_ranks.h).
  auto rank_main = [&](comm::Communicator& comm) {
    const int rank = comm.rank();
    const Device mine_on = comm.device();
    std::shared_ptr<pipeline::PipelineGroups> split;
    pipeline::PipelineGroups groups;
    groups.pipeline = &comm;
    if (layout.replicas > 1) {
      split = pipeline::PipelineGroups::split(comm, schedule.ranks());
      groups.pipeline = split->pipeline;
      groups.replicas = split->replicas;
      groups.replica = split->replica;
    }
    // Every rank builds only its chunks' layers, each parameter drawn by its name: the whole model's
    // values there (gpt_stages.h).
    nn::GPTConfig config = work.model;
    config.device = mine_on;
    const std::shared_ptr<nn::GPT> model_ptr =
        pipeline::gpt_rank_model(config, partition, schedule.layout, groups.pipeline->rank());
    nn::GPT& model = *model_ptr;
    pipeline::GptStages mine = pipeline::gpt_stages(model, partition, schedule.layout, groups.pipeline->rank());
    pipeline::PipelineOptions options;
    options.trace = true;
    options.ties = mine.ties;
    options.overlap_reduce = layout.overlap;
    pipeline::Pipeline pipe(groups, schedule, mine.chunks, mine.loss, options);
    // The batch, on this rank's GPU when it is another (every replica runs the same batch).
    std::vector<Tensor> inputs = work.inputs, targets = work.targets;
    if (mine_on != device) {
      for (Tensor& t : inputs) t = t.to(mine_on);
      for (Tensor& t : targets) t = t.to(mine_on);
    }
    for (int step = 0; step < warmup + steps; ++step) {
      model.zero_grad();
      comm.barrier();  // a common start, so the slowest rank's time is the step's
      const Clock::time_point start = Clock::now();
      const pipeline::StepStats stats = pipe.forward_backward(inputs, targets);
      if (mine_on.is_cuda()) current_stream(mine_on).synchronize();
      const double elapsed = seconds_since(start);
      if (step < warmup) continue;
      const size_t i = size_t(step - warmup);
      seconds[size_t(rank)][i] = elapsed;
      // Every rank holds the gathered trace and the loss; one copy is enough. Ranks write disjoint
      // slots, so no lock is needed.
      if (rank == 0) {
        out.traces[i] = pipe.last_trace();
        out.loss = stats.loss;
      }
      if (rank < schedule.ranks())
        out.peak_stashed[size_t(rank)] = std::max(out.peak_stashed[size_t(rank)], stats.peak_stashed);
      reductions[size_t(rank)] = stats.reductions;
      early[size_t(rank)] = stats.reductions_during_backward;
    }
  };
  try {
    comm::run_local_ranks(comms, rank_main);
  } catch (const std::exception& e) {
    fail("schedule '", schedule.name, "' (P=", schedule.ranks(), ", R=", layout.replicas, ", M=", schedule.microbatches,
         ", V=", schedule.chunks(), ") failed: ", e.what());
  }

  for (size_t r = 0; r < ranks; ++r) {
    out.reductions += reductions[r];
    out.reductions_during_backward += early[r];
  }
  for (size_t i = 0; i < size_t(steps); ++i) {
    double slowest = 0;
    for (const auto& rank_seconds : seconds) slowest = std::max(slowest, rank_seconds[i]);
    out.seconds.push_back(slowest);
  }
  return out;
}

UnpipelinedSteps run_unpipelined(const Workload& work, int warmup, int steps) {
  const Device device = work.model.device;
  OwnStream stream(device);
  nn::GPT model(work.model);
  const int M = int(work.inputs.size());
  UnpipelinedSteps out;
  out.parameters = model.parameter_count();
  for (int step = 0; step < warmup + steps; ++step) {
    model.zero_grad();
    std::vector<Tensor> losses;
    const Clock::time_point start = Clock::now();
    for (int m = 0; m < M; ++m) {
      Tape tape;
      Tensor loss;
      {
        TapeGuard recording(tape);
        loss = model.loss(work.inputs[size_t(m)], work.targets[size_t(m)]);
      }
      tape.backward({loss}, {full(loss.shape(), 1.0 / M, loss.dtype(), loss.device())});
      losses.push_back(loss);  // read after the clock stops: item() would wait for the GPU each time
    }
    stream.synchronize();
    const double elapsed = seconds_since(start);
    if (step < warmup) continue;
    out.seconds.push_back(elapsed);
    out.loss = 0;
    for (const Tensor& l : losses) out.loss += l.item() / M;
  }
  return out;
}

}  // namespace brigade::bench_pipeline
