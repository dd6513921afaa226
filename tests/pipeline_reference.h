// The pipeline runtime's reference runs, shared by the suites that hold a pipeline of a GPT (either
// family) against one-device training: a tiny model, token batches, the one-device reference
// (every micro-batch's backward seeded with 1/M), the pipeline on local threads with each rank
// building only its own layers, and the bitwise comparison.
#pragma once

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "comm/comm.h"
#include "comm/thread_ranks.h"
#include "nn/gpt.h"
#include "pipeline/executor.h"
#include "pipeline/gpt_stages.h"
#include "pipeline/runtime.h"
#include "pipeline/schedule.h"
#include "test_util.h"

namespace test::runtime {

using namespace brigade;
using namespace brigade::pipeline;

inline nn::GPTConfig tiny_gpt() {
  nn::GPTConfig c;
  c.vocab_size = 11;
  c.block_size = 8;
  c.n_layer = 3;  // 5 layers in the pipeline: embed, 3 blocks, head
  c.n_head = 2;
  c.n_embd = 8;
  c.seed = 7;
  return c;
}

// Token ids in [0, vocab) from a counter hash; targets have a few ignored (-1) positions.
inline Tensor tokens(int64_t b, int64_t t, uint64_t seed, bool with_ignored) {
  Tensor out = zeros({b, t}, DType::i64);
  int64_t* d = out.data<int64_t>();
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < b * t; ++i) {
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    d[i] = int64_t(x % 11);
    if (with_ignored && i % 7 == 3) d[i] = -1;
  }
  return out;
}

struct Batch {
  std::vector<Tensor> inputs, targets;
};

inline PipelineOptions with_ties(const std::vector<Tie>& ties) {
  PipelineOptions o;
  o.ties = ties;
  return o;
}
inline PipelineOptions recomputing() {
  PipelineOptions o;
  o.recompute = true;
  return o;
}
inline PipelineOptions tracing(PipelineOptions o) {
  o.trace = true;
  return o;
}

// Rank comm.rank()'s pipeline of `model`, built whole on every rank: its stages under `partition`
// and `schedule`, `comm` as the pipeline group, `options` with the model's ties, and the model's loss
// unless `loss` is given.
inline Pipeline whole_model_pipeline(nn::GPT& model, const Partition& partition, const Schedule& schedule,
                                     comm::Communicator& comm, PipelineOptions options = {}, LossFn loss = nullptr) {
  GptStages mine = gpt_stages(model, partition, schedule.layout, comm.rank());
  options.ties = mine.ties;
  PipelineGroups groups;
  groups.pipeline = &comm;
  return Pipeline(groups, schedule, mine.chunks, loss ? loss : mine.loss, options);
}

// M micro-batches of 2 sequences; with `varying`, micro-batch m has length 3 + m % 4.
inline Batch make_batch(int M, uint64_t seed, bool varying = false) {
  Batch b;
  for (int m = 0; m < M; ++m) {
    const int64_t T = varying ? 3 + m % 4 : 6;
    b.inputs.push_back(tokens(2, T, seed * 100 + uint64_t(m), false));
    b.targets.push_back(tokens(2, T, seed * 100 + 50 + uint64_t(m), true));
  }
  return b;
}

struct Result {
  std::vector<double> losses;        // per micro-batch
  double loss = 0;                   // their mean
  std::map<std::string, Tensor> grads;  // by the one-device model's parameter names
  std::vector<int> peak_stashed;     // per rank
};

// One device: every micro-batch's backward seeded with 1/M, gradients accumulating. With half blocks
// the model runs as model.layers(half_block) in order (the halves' backward may differ from the
// fused block's in the last bit, so the reference runs them too).
inline Result reference(const Batch& batch, nn::GPTConfig config = tiny_gpt(), nn::LayerGrain grain = nn::LayerGrain::block) {
  nn::GPT model(config);
  const Layers halves = model.layers(nn::LayerGrain::half_block);
  Result r;
  const int M = int(batch.inputs.size());
  for (int m = 0; m < M; ++m) {
    Tape tape;
    Tensor loss;
    {
      TapeGuard recording(tape);
      if (grain == nn::LayerGrain::block) {
        loss = model.loss(batch.inputs[size_t(m)], batch.targets[size_t(m)]);
      } else {
        Tensor h = batch.inputs[size_t(m)];
        for (const auto& layer : halves) h = (*layer)(h);
        loss = nn::language_model_loss(h, batch.targets[size_t(m)]);
      }
    }
    tape.backward({loss}, {full(loss.shape(), 1.0 / M, loss.dtype())});
    r.losses.push_back(loss.item());
  }
  for (double l : r.losses) r.loss += l;
  r.loss /= M;
  for (auto& [name, p] : model.named_parameters()) r.grads[name] = p.grad();
  return r;
}

// The pipeline on P threads (local communicators), each rank building only its own layers of the
// GPT (pipeline::gpt_rank_model: the whole model's values there, drawn by name). With rendezvous
// sends the threads behave like gloo or NCCL at their strictest (comm/local.h). `partition`: of
// model.layers(grain); by default uniform.
inline Result pipelined(const Schedule& schedule, const Batch& batch, PipelineOptions options = {},
                 nn::GPTConfig config = tiny_gpt(), comm::LocalSends sends = comm::LocalSends::queued,
                 nn::LayerGrain grain = nn::LayerGrain::block, Partition partition = {}) {
  const int P = schedule.ranks();
  const int64_t layers = grain == nn::LayerGrain::block ? config.n_layer + 2 : 2 * config.n_layer + 2;
  if (partition.bounds.empty()) partition = partition_uniform(layers, schedule.stages());
  // Rendezvous runs take milliseconds; a short timeout turns a wrong exchange order into a quick failure.
  const comm::Milliseconds timeout =
      sends == comm::LocalSends::rendezvous ? comm::Milliseconds(20'000) : comm::default_timeout();
  auto comms = comm::local_group(P, Device::cpu(), timeout, sends);
  Result r;
  r.peak_stashed.resize(size_t(P));
  std::mutex mutex;
  auto errors = test::run_ranks(comms, [&](comm::Communicator& comm) {
    const std::shared_ptr<nn::GPT> mine_only = gpt_rank_model(config, partition, schedule.layout, comm.rank(), grain);
    nn::GPT& model = *mine_only;
    // Nothing of the other ranks' layers is built.
    const std::vector<int64_t> held = rank_layers(partition, schedule.layout, comm.rank());
    const Layers built = model.layers(grain);
    for (size_t i = 0; i < built.size(); ++i)
      if ((built[i] != nullptr) != std::binary_search(held.begin(), held.end(), int64_t(i)))
        throw Error("rank " + std::to_string(comm.rank()) + " built layer " + std::to_string(i) + " wrongly");
    GptStages mine = gpt_stages(model, partition, schedule.layout, comm.rank(), grain);
    PipelineOptions opts = options;
    opts.ties = mine.ties;
    PipelineGroups groups;
    groups.pipeline = &comm;
    Pipeline pipe(groups, schedule, mine.chunks, mine.loss, opts);
    StepStats stats = pipe.forward_backward(batch.inputs, batch.targets);
    std::lock_guard<std::mutex> lock(mutex);
    r.peak_stashed[size_t(comm.rank())] = stats.peak_stashed;
    if (comm.rank() == 0) {
      r.losses = stats.microbatch_losses;
      r.loss = stats.loss;
    }
    // A parameter with a gradient belongs to one of this rank's stages; the tied embedding is on two
    // ranks, whose copies must agree.
    for (auto& [name, p] : model.named_parameters()) {
      if (!p.grad().defined()) continue;
      auto it = r.grads.find(name);
      if (it == r.grads.end()) r.grads[name] = p.grad();
      else if (it->second.to_vector() != p.grad().to_vector()) throw Error("the copies of " + name + " differ");
    }
  });
  for (size_t i = 0; i < errors.size(); ++i) INFO("rank " << i << ": " << errors[i]);
  for (const std::string& e : errors) REQUIRE(e.empty());
  return r;
}

inline Result pipelined(ScheduleKind kind, int P, int M, int V, const Batch& batch, PipelineOptions options = {},
                 nn::GPTConfig config = tiny_gpt(), comm::LocalSends sends = comm::LocalSends::queued) {
  return pipelined(make_schedule(kind, P, M, V), batch, std::move(options), config, sends);
}

// Bitwise, except where `tolerant` names the parameter.
inline void require_same(const Result& got, const Result& want, const std::string& tolerant) {
  REQUIRE(got.losses == want.losses);
  REQUIRE(got.loss == want.loss);
  REQUIRE(got.grads.size() == want.grads.size());
  for (auto& [name, g] : want.grads) {
    INFO("parameter " << name);
    REQUIRE(got.grads.count(name));
    if (name == tolerant) test::require_close(got.grads.at(name), g, 1e-7, 1e-5);
    else test::require_equal(got.grads.at(name), g);
  }
}

// The tied embedding is compared bitwise when one stage holds both of its uses (and always when the
// head is untied: nothing is summed across stages then).
inline std::string tolerant_name(int stages, const nn::GPTConfig& config = tiny_gpt()) {
  Partition p = partition_uniform(config.n_layer + 2, stages);
  const bool apart = p.stage_of_layer(0) != p.stage_of_layer(p.layers() - 1);
  return apart && config.tie_embeddings ? "embed.wte.weight" : "";
}

}  // namespace test::runtime
