#include "pipeline/runtime.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <set>

#include "core/error.h"
#include "core/factory.h"
#include "kernels/ops.h"
#include "kernels/optimizer_ops.h"
#include "nn/activation.h"
#include "pipeline/exchange.h"
#include "pipeline/host_values.h"

namespace brigade::pipeline {

// One tie as this rank sees it: its local copies (distinct tensors; one stage's, or several when
// P = 1 puts several holders on this rank and they are not already the same tensor) and the group of
// the ranks holding a copy.
struct Pipeline::TieGroup {
  Tie tie;
  std::vector<Tensor> copies;
  std::unique_ptr<comm::Communicator> holders;  // null when every holder is this rank, or this rank holds none
  bool counts_in_norm = false;  // the rank of the tie's first stage counts it once in the global norm
};

std::shared_ptr<PipelineGroups> PipelineGroups::split(comm::Communicator& world, int pipeline_ranks) {
  BRIGADE_CHECK(pipeline_ranks >= 1 && world.size() % pipeline_ranks == 0, "pipeline: cannot split ", world.size(),
                " ranks into pipelines of ", pipeline_ranks, " ranks (the world size must be a multiple of the "
                "number of pipeline ranks; the quotient is the number of data-parallel replicas)");
  auto groups = std::make_shared<PipelineGroups>();
  const int replica = world.rank() / pipeline_ranks, stage_rank = world.rank() % pipeline_ranks;
  groups->owned_pipeline = world.split(replica, stage_rank);
  groups->owned_replicas = world.split(stage_rank, replica);
  groups->pipeline = groups->owned_pipeline.get();
  groups->replicas = groups->owned_replicas.get();
  groups->replica = replica;
  return groups;
}

namespace {

// Recomputation replays each forward; a dropout layer would draw a different mask the second time
// and the gradient would belong to another network. Refuse rather than train on it.
void check_recompute_is_deterministic(const std::vector<Chunk>& chunks, int rank) {
  for (const Chunk& chunk : chunks) {
    for (const auto& layer : chunk.layers) {
      std::vector<std::shared_ptr<nn::Module>> modules = {layer};
      for (auto& [name, m] : layer->named_modules()) modules.push_back(m);
      for (const auto& m : modules) {
        auto* dropout = dynamic_cast<nn::Dropout*>(m.get());
        BRIGADE_CHECK(!(dropout && dropout->is_training() && dropout->p > 0), "pipeline (rank ", rank,
                      "): activation recomputation with an active Dropout(p=", dropout ? dropout->p : 0.0,
                      ") would draw a different mask when the forward is replayed; use p=0, eval mode, or no "
                      "recomputation");
      }
    }
  }
}

// Ties: every rank's chunks list exactly the copies the ties say.
void check_ties(const std::vector<Tie>& ties, const Layout& layout, const std::vector<Chunk>& chunks, int me) {
  std::set<std::string> tie_names;
  for (const Tie& tie : ties) {
    BRIGADE_CHECK(tie_names.insert(tie.name).second, "pipeline: two ties are named '", tie.name, "'");
    BRIGADE_CHECK(tie.stages.size() >= 2, "pipeline: tie '", tie.name, "' lists ", tie.stages.size(),
                  " stage(s); a tie joins at least two");
    for (int s : tie.stages)
      BRIGADE_CHECK(s >= 0 && s < layout.stages(), "pipeline: tie '", tie.name, "' names stage ", s, " but there are ",
                    layout.stages(), " stages");
  }
  for (int c = 0; c < int(chunks.size()); ++c) {
    const int s = layout.stage(me, c);
    for (const auto& [name, t] : chunks[size_t(c)].tied) {
      auto it = std::find_if(ties.begin(), ties.end(), [&](const Tie& tie) {
        return tie.name == name && std::count(tie.stages.begin(), tie.stages.end(), s);
      });
      BRIGADE_CHECK(it != ties.end(), "pipeline: stage ", s, " (rank ", me, ") lists a tied copy '", name,
                    "' but no tie in the options joins that name on stage ", s);
      BRIGADE_CHECK(t.defined() && t.requires_grad(), "pipeline: stage ", s, "'s copy of tie '", name,
                    "' must be a parameter (a leaf that requires grad)");
    }
  }
}

}  // namespace

Pipeline::Pipeline(const PipelineGroups& groups, Schedule schedule, std::vector<Chunk> chunks, LossFn loss,
                   PipelineOptions options)
    : options_(std::move(options)), loss_(loss) {
  BRIGADE_CHECK(groups.pipeline != nullptr, "pipeline: no pipeline communicator");
  groups_.pipeline = groups.pipeline;
  groups_.replicas = groups.replicas;
  groups_.replica = groups.replica;
  comm::Communicator& comm = *groups_.pipeline;
  check_fits(schedule, chunks);
  check_ties(options_.ties, schedule.layout, chunks, comm.rank());
  build_tie_groups(schedule.layout, chunks);
  if (options_.recompute) check_recompute_is_deterministic(chunks, comm.rank());
  // Sends that wait for their receivers, or messages paired by order, can make a badly placed
  // exchange wait in a cycle (as interleaved did with its messages next to their actions, see
  // MessagePlacement; and zb-v with M = 1 on NCCL while the transport issued an exchange's sends
  // after its incoming headers). Every generated schedule passes; a hand-written one that does not
  // is refused up front (pipeline/exchange.h).
  check_exchanges_for(comm, schedule, options_.variable_shapes);
  // The executor connects every link the schedule sends on before the first step (NCCL would
  // otherwise set each up at its first use and may wait there in a cycle: pipeline/executor.cpp).
  ExecutorOptions exec;
  exec.recompute = options_.recompute;
  exec.variable_shapes = options_.variable_shapes;
  exec.skips = options_.skips;
  executor_ = std::make_unique<Executor>(comm, std::move(schedule), std::move(chunks), std::move(loss), exec);
  if (replicas() > 1) build_replica_buckets();
  connect_collectives();
}

// The collectives a step runs, each connected before the first step (Communicator::connect_collectives):
// on NCCL the first of each would otherwise make the host wait inside it for every peer — for the
// replica buckets, in the middle of the backward. Every group's members call this alike: the
// pipeline's ranks, each tie's holders (in the ties' order), each stage's replicas.
void Pipeline::connect_collectives() {
  const int M = executor_->schedule().microbatches;
  groups_.pipeline->connect_collectives({comm::CollectiveUse::broadcast(M, DType::f64)});  // the losses
  for (const auto& group : ties_)
    if (group->holders) {
      const Tensor& copy = group->copies.front();
      group->holders->connect_collectives({comm::CollectiveUse::all_reduce(copy.numel(), copy.dtype(), comm::ReduceOp::sum)});
    }
  if (buckets_) {
    std::vector<comm::CollectiveUse> uses = buckets_->uses();
    uses.push_back(comm::CollectiveUse::all_reduce(1, DType::f64, comm::ReduceOp::average));  // the mean loss
    groups_.replicas->connect_collectives(uses);
  }
}

// The schedule's ranks and chunks are this pipeline's.
void Pipeline::check_fits(const Schedule& schedule, const std::vector<Chunk>& chunks) const {
  const comm::Communicator& comm = *groups_.pipeline;
  const Layout& layout = schedule.layout;
  BRIGADE_CHECK(comm.size() == layout.ranks, "pipeline: the schedule '", schedule.name, "' has ", layout.ranks,
                " ranks but the pipeline communicator has ", comm.size(), " (this is rank ", comm.rank(), ")");
  BRIGADE_CHECK(int(chunks.size()) == layout.chunks, "pipeline: rank ", comm.rank(), " was given ", chunks.size(),
                " chunks but the schedule '", schedule.name, "' has V=", layout.chunks, " chunks per rank");
}

// One TieGroup per tie: this rank's distinct copies, and a group of the ranks holding one.
void Pipeline::build_tie_groups(const Layout& layout, const std::vector<Chunk>& chunks) {
  comm::Communicator& comm = *groups_.pipeline;
  const int me = comm.rank();
  for (const Tie& tie : options_.ties) {
    auto group = std::make_unique<TieGroup>();
    group->tie = tie;
    std::set<int> holder_ranks;
    for (int s : tie.stages) {
      holder_ranks.insert(layout.rank_of(s));
      if (layout.rank_of(s) != me) continue;
      const Chunk& chunk = chunks.at(size_t(layout.chunk_of(s)));
      auto found = chunk.tied.find(tie.name);
      BRIGADE_CHECK(found != chunk.tied.end(), "pipeline: tie '", tie.name, "' joins stage ", s, " but that stage (rank ",
                    me, ") lists no copy of it in Chunk::tied");
      const Tensor& copy = found->second;
      bool seen = false;
      for (const Tensor& t : group->copies) seen = seen || t.same_as(copy);
      if (!seen) group->copies.push_back(copy);
      for (const Tensor& t : group->copies)
        BRIGADE_CHECK(t.shape() == copy.shape() && t.dtype() == copy.dtype(), "pipeline: tie '", tie.name,
                      "' has copies of different shapes or dtypes: ", shape_str(t.shape()), " ", dtype_name(t.dtype()),
                      " and ", shape_str(copy.shape()), " ", dtype_name(copy.dtype()));
    }
    group->counts_in_norm = layout.rank_of(tie.stages.front()) == me;
    if (holder_ranks.size() > 1) {
      // Every pipeline rank takes part in the split; those holding no copy get no group.
      group->holders = comm.split(holder_ranks.count(me) ? 0 : -1, me);
    }
    ties_.push_back(std::move(group));
  }
}

// Data parallelism: each parameter goes with the chunk whose gradients become final last among
// those using it; tied copies wait for the end of the step (they are summed across stages first).
void Pipeline::build_replica_buckets() {
  std::vector<Tensor> tied;
  for (const auto& group : ties_) tied.insert(tied.end(), group->copies.begin(), group->copies.end());
  auto listed = [](const std::vector<Tensor>& list, const Tensor& p) {
    return std::any_of(list.begin(), list.end(), [&](const Tensor& t) { return t.same_as(p); });
  };
  const auto& my_chunks = executor_->chunks();
  std::vector<int> order = executor_->weights_final_order();
  std::vector<std::vector<Tensor>> chunk_params(my_chunks.size());
  std::vector<Tensor> placed = tied;
  for (auto c = order.rbegin(); c != order.rend(); ++c) {
    for (const auto& layer : my_chunks[size_t(*c)].layers)
      for (const Tensor& p : layer->parameters()) {
        if (listed(placed, p)) continue;
        placed.push_back(p);
        chunk_params[size_t(*c)].push_back(p);
      }
  }
  // Within a chunk, the model's order (the walk above went from the last-final chunk backwards
  // only to place shared parameters).
  buckets_ = std::make_unique<ReplicaBuckets>(chunk_params, tied, options_.bucket_bytes);
}

Pipeline::~Pipeline() = default;

std::vector<std::pair<std::string, Tensor>> Pipeline::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  const Layout& layout = executor_->schedule().layout;
  const auto& chunks = executor_->chunks();
  for (int c = 0; c < int(chunks.size()); ++c) {
    const std::string stage = "stage" + std::to_string(layout.stage(rank(), c)) + ".";
    for (size_t i = 0; i < chunks[size_t(c)].layers.size(); ++i) {
      for (auto& [name, p] : chunks[size_t(c)].layers[i]->named_parameters()) {
        bool seen = false;
        for (auto& [n, q] : out) seen = seen || q.same_as(p);
        if (!seen) out.emplace_back(stage + std::to_string(i) + "." + name, p);
      }
    }
  }
  return out;
}

std::vector<Tensor> Pipeline::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, p] : named_parameters()) out.push_back(p);
  return out;
}

StepStats Pipeline::forward_backward(const std::vector<Tensor>& inputs, const std::vector<Tensor>& targets) {
  comm::Communicator& comm = *groups_.pipeline;
  const Schedule& schedule = executor_->schedule();
  const int M = schedule.microbatches;
  const Layout& layout = schedule.layout;
  if (layout.rank_of(0) == rank())
    BRIGADE_CHECK(int(inputs.size()) == M, "pipeline: schedule '", schedule.name, "' runs M=", M,
                  " micro-batches but rank ", rank(), " (stage 0) was given ", inputs.size(), " inputs");
  if (layout.rank_of(layout.stages() - 1) == rank())
    BRIGADE_CHECK(int(targets.size()) == M, "pipeline: schedule '", schedule.name, "' runs M=", M,
                  " micro-batches but rank ", rank(), " (the last stage) was given ", targets.size(), " targets");

  if (!warned_no_host_copy_ && comm.matches_messages_in_order() && options_.variable_shapes) {
    // Index checks of ids and targets the host never saw wait for the GPU (kernels/checked_indices.cpp);
    // with varying shapes on NCCL (messages paired by order) that wait can sit behind a transfer
    // whose peer waits for this rank.
    for (const std::vector<Tensor>* list : {&inputs, &targets})
      for (const Tensor& t : *list)
        if (!warned_no_host_copy_ && t.defined() && t.device().is_cuda() && !is_floating(t.dtype()) &&
            !t.host_mirror().defined()) {
          warned_no_host_copy_ = true;
          std::cerr << "brigade: pipeline rank " << rank() << ": " << (list == &inputs ? "an input" : "a target")
                    << " (" << dtype_name(t.dtype()) << " " << shape_str(t.shape()) << " on " << t.device().str()
                    << ") keeps no host copy (it was not sent from the host with Tensor::to), so checking its "
                       "values waits for the GPU; with varying shapes on NCCL that wait can stall the step until "
                       "the timeout. Copy ids and targets from the host.\n";
        }
  }
  StepStats stats;
  try {
    Trace mine;
    mine.ranks = layout.ranks;
    if (options_.trace) comm.barrier();  // line the ranks' clocks up at the step's start
    // Data parallelism: each chunk's gradients start their all-reduce as soon as they are final
    // (pipeline/replica_buckets.h), during the backward where the transport overlaps it.
    const bool overlap = buckets_ && options_.overlap_reduce && groups_.replicas->overlaps_collectives();
    if (overlap) executor_->on_weights_final([this](int c) { buckets_->start_chunk(*groups_.replicas, c); });
    std::vector<double> losses;
    try {
      losses = executor_->run(inputs, targets, microbatch_loss_scale(M), options_.trace ? &mine : nullptr);
    } catch (...) {
      executor_->on_weights_final(nullptr);
      throw;
    }
    executor_->on_weights_final(nullptr);
    if (buckets_) stats.reductions_during_backward = int(buckets_->started());
    if (buckets_ && !overlap)
      for (int c : executor_->weights_final_order()) buckets_->start_chunk(*groups_.replicas, c);
    stats.peak_stashed = executor_->peak_stashed();

    // The loss, from the last stage to everyone.
    if (losses.empty()) losses.assign(size_t(M), 0.0);
    Tensor all = doubles_on(comm, losses);
    comm.broadcast(all, layout.rank_of(layout.stages() - 1));
    stats.microbatch_losses = doubles_of(all);
    stats.loss = step_loss(stats.microbatch_losses);

    sum_tied_gradients();
    if (buckets_) {
      buckets_->start_late(*groups_.replicas);
      stats.reductions = int(buckets_->started());
      buckets_->finish();
      Tensor mean = doubles_on(*groups_.replicas, {stats.loss});
      groups_.replicas->all_reduce(mean, comm::ReduceOp::average);
      stats.loss = doubles_of(mean)[0];
    }
    if (options_.trace) gather_trace(mine);
  } catch (const std::exception& e) {
    // The peers may be waiting for this rank: make them fail now, not at their timeout.
    const std::string reason = "pipeline rank " + std::to_string(rank()) + " failed: " + e.what();
    comm.abort(reason);
    if (groups_.replicas) groups_.replicas->abort(reason);
    if (buckets_) buckets_->drop();
    throw;
  }
  return stats;
}

void Pipeline::sum_tied_gradients() {
  for (auto& group : ties_) {
    if (group->copies.empty()) continue;
    // This rank's total over its copies (in stage order), then the total over the holding ranks.
    Tensor total;
    for (const Tensor& copy : group->copies) {
      Tensor g = copy.grad();
      if (!g.defined()) continue;
      total = total.defined() ? ops::binary(ops::BinaryOp::add, total, g) : ops::clone(g);
    }
    if (!total.defined()) total = zeros_like(group->copies.front());
    if (group->holders) group->holders->all_reduce(total, comm::ReduceOp::sum);
    for (const Tensor& copy : group->copies) {
      if (copy.grad().defined()) ops::copy_(copy.grad(), total);
      else copy.impl().grad = ops::clone(total).impl_ptr();
    }
  }
}

double Pipeline::clip_grad_norm(double max_norm) {
  BRIGADE_CHECK(std::isfinite(max_norm) && max_norm > 0, "pipeline clip_grad_norm: max_norm must be a finite number > 0, got ",
                max_norm);
  // Which local parameters count: every one, except tied copies whose tie is counted on another rank
  // (and all but one local copy of a tie: after sum_tied_gradients they are equal).
  std::vector<Tensor> skip;
  for (auto& group : ties_) {
    for (size_t i = 0; i < group->copies.size(); ++i)
      if (!group->counts_in_norm || i > 0) skip.push_back(group->copies[i]);
  }
  std::vector<Tensor> grads, counted;
  for (const Tensor& p : parameters()) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    grads.push_back(g);
    if (std::none_of(skip.begin(), skip.end(), [&](const Tensor& t) { return t.same_as(p); })) counted.push_back(g);
  }
  // Summed in f64 on the device, parameter after parameter, in a few launches for all of them
  // (ops::sum_of_squares); then the ranks' sums added up, and the clipping decided on the device with
  // optim::clip_grad_norm's rule. The one read is the norm this returns.
  Tensor total =
      counted.empty() ? doubles_on(*groups_.pipeline, {0.0}) : ops::sum_of_squares(counted).reshape({1});
  groups_.pipeline->all_reduce(total, comm::ReduceOp::sum);
  ops::clip_by_norm_(grads, total, max_norm);
  return std::sqrt(doubles_of(total)[0]);
}

void Pipeline::gather_trace(const Trace& mine) {
  // Every rank's events to every rank, as rows of doubles: (rank, kind, micro-batch, chunk, start, end,
  // memory at the start, at the end, and its peak).
  comm::Communicator& comm = *groups_.pipeline;
  trace_ = Trace{};
  trace_.ranks = comm.size();
  for (int r = 0; r < comm.size(); ++r) {
    Tensor count = doubles_on(comm, {double(r == rank() ? mine.events.size() : 0)});
    comm.broadcast(count, r);
    const size_t n = size_t(doubles_of(count)[0]);
    constexpr size_t kColumns = 9;
    std::vector<double> values(std::max<size_t>(n, 1) * kColumns, 0.0);
    if (r == rank()) {
      double* d = values.data();
      for (const TraceEvent& e : mine.events) {
        *d++ = e.rank;
        *d++ = double(e.action.kind);
        *d++ = e.action.microbatch;
        *d++ = e.action.chunk;
        *d++ = e.start;
        *d++ = e.end;
        *d++ = e.memory_start;
        *d++ = e.memory_end;
        *d++ = e.memory_peak;
      }
    }
    Tensor rows = doubles_on(comm, values);
    comm.broadcast(rows, r);
    values = doubles_of(rows);
    const double* d = values.data();
    for (size_t i = 0; i < n; ++i, d += kColumns) {
      TraceEvent e;
      e.rank = int(d[0]);
      e.action = Action{ActionKind(int(d[1])), int(d[2]), int(d[3])};
      e.start = d[4];
      e.end = d[5];
      e.memory_start = d[6];
      e.memory_end = d[7];
      e.memory_peak = d[8];
      trace_.events.push_back(e);
    }
  }
}

std::vector<Tensor> split_microbatches(const Tensor& batch, int microbatches) {
  BRIGADE_CHECK(batch.defined() && batch.dim() >= 1, "split_microbatches: needs a batch with a leading dimension");
  BRIGADE_CHECK(microbatches >= 1, "split_microbatches: needs at least one micro-batch, got M=", microbatches);
  const int64_t B = batch.shape()[0];
  BRIGADE_CHECK(B % microbatches == 0, "split_microbatches: a batch of ", B, " (shape ", shape_str(batch.shape()),
                ") does not split into M=", microbatches, " equal micro-batches; choose a batch size that is a "
                "multiple of the number of micro-batches");
  const int64_t b = B / microbatches;
  std::vector<Tensor> out;
  for (int m = 0; m < microbatches; ++m) out.push_back(batch.narrow(0, m * b, b));
  return out;
}

double microbatch_loss_scale(int microbatches) {
  BRIGADE_CHECK(microbatches >= 1, "microbatch_loss_scale: needs at least one micro-batch, got M=", microbatches);
  return 1.0 / microbatches;
}

double step_loss(const std::vector<double>& microbatch_losses) {
  BRIGADE_CHECK(!microbatch_losses.empty(), "step_loss: no micro-batch losses");
  double sum = 0;
  for (double l : microbatch_losses) sum += l;  // in micro-batch order: the sum's rounding is part of the result
  return sum / double(microbatch_losses.size());
}

}  // namespace brigade::pipeline
