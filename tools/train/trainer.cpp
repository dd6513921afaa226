// The Trainer's model, optimizer and steps. Its checkpoints (gather, save, resume) are in
// trainer_state.cpp; the `brigade train` run around it (progress, saving, reports) in run.cpp.
#include "trainer.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <thread>

#include "autograd/tape.h"
#include "checkpoint_dir.h"
#include "core/error.h"
#include "core/factory.h"
#include "core/format.h"
#include "core/parallel.h"
#include "optim/clip_grad.h"
#include "pipeline/analysis/plan_memory.h"
#include "pipeline/analysis/simulator.h"
#include "pipeline/gpt_stages.h"
#include "pipeline/schedule_csv.h"
#include "comm/comm.h"
#include "comm/launch_env.h"
#include "core/stream.h"
#include "kernels/ops.h"
#include "pipeline/trace.h"
#include "pipeline_eval.h"
#include "tools/cli/gpt_flags.h"
#include "memory_report.h"
#include "text_task.h"

namespace brigade::train {

namespace {

// One device, several micro-batches: the head's use of the tied token embedding gathers its gradient
// apart, and the two totals are added once all micro-batches are done — as a pipeline whose
// embedding and head sit on two ranks adds its two stages' totals (Pipeline::sum_tied_gradients).
// One shared gradient would interleave the two uses micro-batch by micro-batch, another order of
// the same sum, whose rounding then reaches every weight from the next step on. An untied head
// (a llama's lm_head) shares nothing: then this does nothing.
class TiedGradientApart {
 public:
  explicit TiedGradientApart(nn::GPT& model) : head_(model.head) {
    if (!model.config().tie_embeddings) return;
    embedding_ = model.embed->wte->weight;
    apart_ = embedding_.detach();
    apart_.requires_grad_(true);  // the same data; a leaf, with a gradient of its own
    head_->wte = apart_;
  }
  ~TiedGradientApart() {
    if (embedding_.defined()) head_->wte = embedding_;
  }
  TiedGradientApart(const TiedGradientApart&) = delete;
  TiedGradientApart& operator=(const TiedGradientApart&) = delete;

  // The embedding's total plus the head's, as the embedding's gradient.
  void add_up() {
    if (!embedding_.defined()) return;
    const Tensor e = embedding_.grad(), h = apart_.grad();
    if (!h.defined()) return;
    embedding_.set_grad(e.defined() ? ops::binary(ops::BinaryOp::add, e, h) : h);
  }

 private:
  std::shared_ptr<nn::GPTHead> head_;
  Tensor embedding_, apart_;
};

// GPT-2's recipe: weight decay on the matrices (embeddings, projections) only; decaying biases and
// norm gains towards zero just fights the normalisation. `mine` picks this rank's parameters.
std::vector<optim::ParamGroup> param_groups(const nn::GPT& model, const std::function<bool(const Tensor&)>& mine) {
  optim::ParamGroup decayed, not_decayed;
  not_decayed.weight_decay = 0.0;
  for (auto& [name, p] : model.named_parameters())
    if (mine(p)) (p.dim() >= 2 ? decayed : not_decayed).params.emplace_back(name, p);
  return {decayed, not_decayed};
}

std::unique_ptr<Task> make_task(const TrainOptions& o) {
  if (o.data.empty()) return std::make_unique<SortTask>(o.digits, o.seed);
  return std::make_unique<TextTask>(o.data, o.context, o.vocab, o.seed);
}

// The model's vocabulary: the task's (padded) one, or a Hugging Face --init-from model's, all of
// whose rows are kept, when the task's tokens are all below it.
int64_t model_vocab(const TrainOptions& o, const Task& task) {
  if (o.model_vocab == 0) return task.vocab_size();
  const auto* lm = dynamic_cast<const TextTask*>(&task);
  const int64_t needed = lm ? lm->tokenizer_vocab() : task.vocab_size();
  BRIGADE_CHECK(needed <= o.model_vocab, "--init-from ", o.init_from, ": its model has a vocabulary of ", o.model_vocab,
                " tokens; this task needs ", needed, " (", task.describe(), ")");
  return o.model_vocab;
}

}  // namespace

Trainer::Trainer(const TrainOptions& options, const pipeline::PipelineGroups* groups)
    : options_(options),
      task_(make_task(options)),
      groups_(groups),
      first_loss_(std::numeric_limits<double>::quiet_NaN()) {
  // --device as it is: run_training has checked it can be used here (cli::usable_device). Under
  // `brigade launch` each process drives the GPU of its local rank, which its communicator was made
  // for: the model goes there too (not to cuda:0 in every process).
  Device device = cli::device_or_default(options_.device);
  if (groups_ != nullptr && device.is_cuda()) device = groups_->pipeline->device();
  // No dropout (gpt_config's): every step a pure function of the data, so resumes are exact.
  nn::GPTConfig& config = config_;
  config = cli::gpt_config({.layers = options_.layers, .heads = options_.heads, .embd = options_.embd,
                            .vocab = model_vocab(options_, *task_), .context = task_->sequence_length(),
                            .decoder = options_.decoder},
                           device, cli::precision_on(options_.precision, device), options_.seed);
  if (groups_ == nullptr) {
    model_ = std::make_shared<nn::GPT>(config);
  } else {
    const int P = groups_->pipeline->size();
    pipeline::Schedule schedule =
        options_.schedule_file.empty()
            ? pipeline::make_schedule(options_.schedule, P, int(options_.microbatches), int(options_.chunks_or_default()))
            : pipeline::schedule_from_file(pipeline::read_schedule_csv(options_.schedule_file));
    partition_method_ = resolve_partition(config);
    const nn::LayerGrain grain = partition_method_ == pipeline::PartitionMethod::balanced ? nn::LayerGrain::half_block : nn::LayerGrain::block;
    layer_count_ = nn::GPT::layer_count(config, grain);
    // World rank 0 measures and describes the layers on a sample of the model (sample_layers_), freed
    // before this rank builds its own layers: no rank ever holds the whole model for training.
    const bool world_first = groups_->pipeline->rank() == 0 && (!groups_->replicas || groups_->replicas->rank() == 0);
    if (world_first) {
      const int64_t last = layer_count_ - 1;
      std::vector<int64_t> held = {0, 1, last};
      if (grain == nn::LayerGrain::half_block) held.push_back(2);
      const nn::GPT sample(config, grain, held);
      const pipeline::Layers some = sample.layers(grain);
      for (int64_t i = 0; i < layer_count_; ++i)
        sample_layers_.push_back(i == 0 || i == last ? some[size_t(i)]
                                 : grain == nn::LayerGrain::block ? some[1]
                                                                  : some[size_t(2 - i % 2)]);  // odd: attention
      partition_ = choose_partition(schedule);
      partition_table_ = pipeline::describe_partition(partition_, sample_layers_, schedule.layout);
      auto bytes_of = [device = config.device](const std::vector<Tensor>& params) {
        LayerBytes b;
        for (const Tensor& p : params) {
          const int64_t n = allocated_bytes(device, p.storage().nbytes());
          b.parameters += n;
          b.elements += p.numel();
          b.nbytes += int64_t(p.storage().nbytes());
          if (p.requires_grad()) {
            b.gradients += n;
            b.optimizer += 2 * allocated_bytes(device, size_t(p.numel()) * 4);  // AdamW's two f32 moments
          }
        }
        return b;
      };
      for (const auto& layer : sample_layers_) layer_bytes_.push_back(bytes_of(layer->parameters()));
      if (config.tie_embeddings) tied_bytes_ = bytes_of({sample.embed->wte->weight});  // else none shared
      sample_layers_.clear();
    } else {
      partition_ = choose_partition(schedule);
    }
    // This rank's layers only, drawn by name: what the whole model holds there (nn/gpt.h).
    model_ = pipeline::gpt_rank_model(config, partition_, schedule.layout, groups_->pipeline->rank(), grain);
    pipeline::GptStages mine =
        pipeline::gpt_stages(*model_, partition_, schedule.layout, groups_->pipeline->rank(), grain);
    pipeline::PipelineOptions po;
    po.recompute = options_.recompute;
    po.ties = mine.ties;
    pipe_ = std::make_unique<pipeline::Pipeline>(*groups_, schedule, mine.chunks, mine.loss, po);
  }
  optim::AdamWOptions adamw;
  adamw.lr = options_.lr;
  adamw.weight_decay = options_.weight_decay;
  std::vector<optim::ParamGroup> groups_of_mine = param_groups(*model_, [this](const Tensor& p) { return owns(p); });
  // A stage may hold no parameters at all (more stages than layers): it has nothing to update.
  if (!groups_of_mine[0].params.empty() || !groups_of_mine[1].params.empty())
    optimizer_ = std::make_unique<optim::AdamW>(std::move(groups_of_mine), adamw);
  schedule_.base_lr = options_.lr;
  schedule_.min_lr = options_.lr * TrainOptions::min_lr_ratio;
  schedule_.total_steps = options_.steps;
  schedule_.warmup_steps = std::min(options_.warmup, options_.steps);
  if (!options_.resume.empty()) resume(options_.resume);
  else if (is_checkpoint_dir(options_.save)) resume_newest(options_.save);
  if (!options_.init_from.empty() && resumed_from_.empty()) init_from(options_.init_from);
}

Trainer::~Trainer() = default;

bool Trainer::owns(const Tensor& parameter) const {
  if (!pipe_) return true;
  for (const Tensor& p : pipe_->parameters())
    if (p.same_as(parameter)) return true;
  return false;
}

bool Trainer::is_leader() const {
  return groups_ == nullptr || (groups_->replica == 0 && groups_->pipeline->rank() == 0);
}

void Trainer::set_trace(bool on) {
  if (pipe_) pipe_->set_trace(on);
}

DType Trainer::compute_dtype() const { return model_->config().compute_dtype.value_or(model_->config().dtype); }

pipeline::PartitionMethod Trainer::resolve_partition(const nn::GPTConfig& config) {
  if (options_.partition) {
    partition_reason_ = "asked for";
    return *options_.partition;
  }
  // A pipeline runs at the pace of its slowest stage only when its stages run at once: each on a
  // GPU (or stream) of its own, or each rank thread on a core of its own. Then balancing pays. When
  // rank threads share cores, the total work sets the pace instead, and whole blocks are a little
  // less of it than halves (their residual add and norm fused): on two cores with four ranks the
  // two splits ran at the same speed, whole blocks 1-4% ahead (bench/results/cpu-partition-2026-11-27.md).
  // Whole blocks then, weighed by their parameters, which the config gives, so every run cuts the
  // same way: the tiny embedding and head share a stage with a block rather than idle on their own.
  const comm::LaunchEnv launch = comm::read_launch_env();
  const int64_t rank_threads = launch.world_size > 1 ? launch.local_world_size : options_.stages * options_.replicas;
  const int64_t cores = int64_t(std::max(1u, std::thread::hardware_concurrency()));
  int64_t balanced = config.device.is_cuda() || options_.memory_budget > 0 || cores >= rank_threads;
  // Every rank must cut alike, and machines may differ in cores: world rank 0 decides.
  balanced = leaders_value(balanced);
  if (config.device.is_cuda()) partition_reason_ = "auto: each stage on a GPU stream of its own";
  else if (options_.memory_budget > 0) partition_reason_ = "auto: a memory budget was given";
  else if (balanced) partition_reason_ = "auto: a core for each of the " + std::to_string(rank_threads) + " rank threads";
  else
    partition_reason_ = "auto: " + std::to_string(rank_threads) + " rank threads share " + std::to_string(cores) +
                        " cores, so the total work sets the pace; --partition balanced evens the stages";
  return balanced ? pipeline::PartitionMethod::balanced : pipeline::PartitionMethod::params;
}

pipeline::Partition Trainer::choose_partition(const pipeline::Schedule& schedule) {
  const int64_t stages = schedule.stages();
  switch (partition_method_) {
    case pipeline::PartitionMethod::layers: return pipeline::partition_uniform(layer_count_, stages);
    case pipeline::PartitionMethod::params: {
      // Counted from the config (the same numbers as the layers' parameter_count()): no rank builds them.
      std::vector<double> counts;
      for (int64_t n : nn::GPT::layer_parameter_counts(config_, nn::LayerGrain::block)) counts.push_back(double(n));
      return pipeline::partition_by_cost(counts, stages, "parameters");
    }
    case pipeline::PartitionMethod::time:
      return pipeline::partition_by_cost(shared_layer_seconds(false), stages, "seconds");
    case pipeline::PartitionMethod::balanced: return balanced_partition(schedule);
  }
  fail("unknown partition method");
}

std::vector<double> Trainer::shared_layer_seconds(bool recompute) {
  // Timings differ from rank to rank (and run to run), and every rank must cut the model the same
  // way: world rank 0 profiles one micro-batch and its numbers go to every rank.
  comm::Communicator& comm = *groups_->pipeline;
  const int64_t n = layer_count_;
  Tensor seconds = zeros({n}, DType::f64, comm.device());
  // One rank measures, world rank 0, on its sample of the layers, while the others wait (before
  // they build their own layers): rank threads share a GPU (or cores) here, and another's work would
  // show in the timings.
  comm.barrier();
  if (groups_->replicas) groups_->replicas->barrier();
  if (comm.rank() == 0 && (!groups_->replicas || groups_->replicas->rank() == 0)) {
    const int64_t rows = options_.batch / options_.replicas / options_.microbatches;
    Batch sample = task_->train_batch(0, rows);
    std::vector<double> each;
    // With recomputation each backward runs the layer's forward once more.
    for (const pipeline::LayerProfile& p :
         pipeline::profile_layer_costs(sample_layers_, sample.inputs.to(config_.device)))
      each.push_back(p.seconds + (recompute ? p.forward_seconds : 0));
    seconds = from_vector(each, {n}, DType::f64, comm.device());
  }
  comm.broadcast(seconds, 0);  // (profiling leaves no gradients behind)
  // Data-parallel replicas must cut alike too (their gradients are averaged parameter by parameter):
  // replica 0's numbers win.
  if (groups_->replicas) groups_->replicas->broadcast(seconds, 0);
  return seconds.to_vector();
}

pipeline::Partition Trainer::balanced_partition(const pipeline::Schedule& schedule) {
  const std::vector<double> seconds = shared_layer_seconds(options_.recompute);
  if (options_.memory_budget == 0)
    return pipeline::partition_by_cost(seconds, schedule.stages(), "seconds");  // no limit: time alone decides
  // How many micro-batches each stage stashes at once is the schedule's, whatever the split.
  const pipeline::SimulationResult simulated = pipeline::simulate(schedule);
  const pipeline::PlannedPipeline planned = planned_pipeline(schedule);
  const std::vector<pipeline::LayerMemory> memory = pipeline::layer_memory(planned);
  // The budget is for everything a rank holds, as `brigade plan` counts it (plan_memory.h): what
  // every rank holds whatever the split (the batch, message buffers, one backward's workspace) comes
  // off first; the rest is for the layers' parameters, training state and stashes.
  const int64_t overhead = pipeline::memory_overhead(planned, simulated.peak_activations);
  auto split_within = [&](int64_t budget) {
    return pipeline::partition_within_memory(
        seconds, memory, pipeline::memory_limit(schedule.layout, simulated.peak_activations, budget - overhead),
        "seconds");
  };
  auto fits = [&](int64_t budget) {
    if (budget <= overhead) return false;
    try {
      split_within(budget);
      return true;
    } catch (const Error&) {
      return false;
    }
  };
  if (options_.memory_budget > overhead) {
    try {
      return split_within(options_.memory_budget);
    } catch (const Error&) {  // nothing fits: say what would, below
    }
  }
  // Say what would fit: the least budget, by bisection (fits() only grows with the budget).
  int64_t low = options_.memory_budget, high = std::max<int64_t>(2 * overhead, 2 * low);
  while (!fits(high)) {
    BRIGADE_CHECK(high < (int64_t(1) << 60), "--memory-budget: no budget up to 1 EiB fits the ", layer_count_,
                  " layers into ", schedule.stages(), " stages");
    high *= 2;
  }
  while (high - low > std::max<int64_t>(high / 1000, 1)) {
    const int64_t mid = low + (high - low) / 2;
    (fits(mid) ? high : low) = mid;
  }
  fail("--memory-budget ", format_bytes(double(options_.memory_budget)), ": no split of the ", layer_count_,
       " layers into ", schedule.stages(), " stages fits (every rank holds ", format_bytes(double(overhead)),
       " whatever the split: the batch, message buffers, a backward's workspace; each stage its "
       "layers' parameters, training state and a stash per micro-batch in flight); the least that fits is about ",
       format_bytes(double(high)), ". Give more, use more stages, or --recompute");
}

pipeline::PlannedPipeline Trainer::planned_pipeline(const pipeline::Schedule& schedule) const {
  const nn::GPTConfig& c = config_;
  const int64_t rows = options_.batch / options_.replicas / options_.microbatches;  // one micro-batch
  const int64_t T = task_->sequence_length();
  const DType compute = c.compute_dtype.value_or(c.dtype);
  pipeline::PlannedPipeline p;
  p.shape = pipeline::gpt_shape(c);
  p.shape.context = T;
  p.layers = pipeline::estimate_gpt_layers(p.shape, rows, compute);
  p.layout = schedule.layout;
  p.recompute = options_.recompute;
  p.split_backward = schedule.split_backward();
  p.boundary = pipeline::gpt_boundary_bytes(p.shape, rows, compute);
  p.input_bytes = rows * T * 8;                                        // i64 token ids
  p.batch_bytes = 2 * (options_.batch / options_.replicas) * T * 8;  // ids and targets
  return p;
}

const pipeline::Trace& Trainer::last_trace() const {
  BRIGADE_CHECK(pipe_ != nullptr, "brigade train: no pipeline, so no trace");
  return pipe_->last_trace();
}

const pipeline::Schedule& Trainer::schedule() const {
  BRIGADE_CHECK(pipe_ != nullptr, "brigade train: no pipeline, so no schedule");
  return pipe_->schedule();
}

double Trainer::train_step() {
  const int64_t B = options_.batch;
  const Device device = model_->config().device;
  double value = 0;
  if (pipe_) {
    // Replica k trains on its share of the step's batch; the micro-batches split that share.
    const int64_t share = B / pipe_->replicas();
    Batch batch = task_->train_batch(position_ + pipe_->replica() * share, share);
    std::vector<Tensor> inputs = pipeline::split_microbatches(batch.inputs.to(device), int(options_.microbatches));
    std::vector<Tensor> targets = pipeline::split_microbatches(batch.targets.to(device), int(options_.microbatches));
    value = pipe_->forward_backward(inputs, targets).loss;
  } else {
    // Gradient accumulation, as a pipeline computes it (pipeline/runtime.h): the same split, each
    // micro-batch's backward seeded with the same scale and run in micro-batch order, so every
    // gradient sum is rounded as the pipeline rounds it. One micro-batch's activations live at a
    // time. M = 1 is the whole batch at once (a seed of 1, the loss itself).
    const int M = int(options_.microbatches);
    Batch batch = task_->train_batch(position_, B);
    const std::vector<Tensor> inputs = pipeline::split_microbatches(batch.inputs.to(device), M);
    const std::vector<Tensor> targets = pipeline::split_microbatches(batch.targets.to(device), M);
    const double scale = pipeline::microbatch_loss_scale(M);
    std::vector<Tensor> losses;  // read once, at the end: a read per micro-batch would stall a GPU's queue
    {
      TiedGradientApart tied(*model_);
      for (int m = 0; m < M; ++m) {
        Tape tape;
        Tensor loss = tape.record([&] { return model_->loss(inputs[size_t(m)], targets[size_t(m)]); });
        tape.backward({loss}, {full(loss.shape(), scale, loss.dtype(), loss.device())});
        losses.push_back(loss.detach().reshape({1}));
      }
      tied.add_up();
    }
    value = pipeline::step_loss(ops::concat(losses, 0).to_vector());
  }
  if (options_.clip > 0) {
    const double norm = pipe_ ? pipe_->clip_grad_norm(options_.clip)
                              : optim::clip_grad_norm(optimizer_->parameters(), options_.clip);
    BRIGADE_CHECK(std::isfinite(norm), "training diverged at step ", step_ + 1, ": the gradient norm is ", norm,
                  " (loss ", value, "); try a lower --lr");
  }
  if (optimizer_) {
    optimizer_->set_lr(schedule_.lr(step_));
    optimizer_->step();
    optimizer_->zero_grad();
  }

  ++step_;
  position_ += B;
  if (step_ == 1) first_loss_ = value;
  return value;
}

// In a pipeline, evaluation runs through the stages (pipeline_eval.h): every rank of replica 0 takes
// part and gets the result. The other replicas hold the same weights and would compute the same
// numbers, so they skip it (as checkpoints' gathering does) and return the empty result.
bool Trainer::evaluates_here() const { return !pipe_ || pipe_->replica() == 0; }

void Trainer::load_model_state(const nn::StateDict& state) {
  if (model_->is_whole()) {
    model_->load_state_dict(state);
    return;
  }
  // Only the tensors of this rank's layers; strict, so any of them missing from `state` is an error.
  nn::StateDict mine;
  for (const auto& [name, t] : model_->state_dict()) {
    auto it = state.find(name);
    if (it != state.end()) mine[name] = it->second;
  }
  model_->load_state_dict(mine);
}

Accuracy Trainer::evaluate(int64_t examples) {
  const auto* sort = dynamic_cast<const SortTask*>(task_.get());
  BRIGADE_CHECK(sort != nullptr, "brigade train: held-out accuracy is the sort task's measure; --data runs report "
                "validation loss");
  if (!pipe_) return evaluate_sorting(*model_, *sort, options_.seed, examples);
  if (!evaluates_here()) return Accuracy{};
  nn::EvalScope eval(*model_);
  auto through_stages = [&](const std::vector<Tensor>& prompts, int64_t new_tokens) {
    return pipeline_generate(*pipe_, prompts, new_tokens, model_->config().block_size);
  };
  const Accuracy a = evaluate_sorting(through_stages, model_->config().device, *sort, options_.seed, examples);
  return is_leader() ? a : Accuracy{};
}

double Trainer::validation_loss(int64_t windows) {
  const auto* lm = dynamic_cast<const TextTask*>(task_.get());
  BRIGADE_CHECK(lm != nullptr && lm->validation() != nullptr,
                "brigade train: no validation shards to measure a validation loss on");
  windows = std::min(windows, lm->validation()->windows());
  if (!pipe_) return mean_loss(*model_, *lm->validation(), windows, options_.batch);
  if (!evaluates_here()) return std::numeric_limits<double>::quiet_NaN();
  nn::EvalScope eval(*model_);
  const double loss = pipeline_mean_loss(*pipe_, *lm->validation(), windows, options_.batch, model_->config().device);
  return is_leader() ? loss : std::numeric_limits<double>::quiet_NaN();
}

std::string Trainer::sample(int64_t tokens, uint64_t seed) {
  const auto* lm = dynamic_cast<const TextTask*>(task_.get());
  BRIGADE_CHECK(lm != nullptr && lm->tokenizer(), "brigade train: no tokenizer to write a sample with");
  if (!evaluates_here()) return "";
  const text::Tokenizer& tokenizer = *lm->tokenizer();
  // A new document, as every document `brigade data prepare` writes starts; a tokenizer without
  // <|endoftext|> starts from its token 0.
  const double start = tokenizer.has_eot() ? double(tokenizer.eot_id()) : 0.0;
  const Tensor prompt = full({1, 1}, start, DType::i64, model_->config().device);
  nn::GenerateOptions g;
  g.temperature = 0.8;
  g.top_k = 40;
  g.seed = seed;
  // Only ids the tokenizer can decode: not the padding, nor ids a larger --vocab adds.
  g.vocab_limit = std::min(lm->tokenizer_vocab(), int64_t(tokenizer.vocab_size()));
  const int64_t block_size = model_->config().block_size, count = std::min(tokens, block_size - 1);
  nn::EvalScope eval(*model_);
  const std::vector<double> out = pipe_ ? pipeline_generate(*pipe_, {prompt}, count, block_size, g)[0].to_vector()
                                        : model_->generate(prompt, count, g).to_vector();
  if (!is_leader()) return "";
  std::vector<text::TokenId> ids;
  for (size_t i = 1; i < out.size(); ++i) ids.push_back(text::TokenId(out[i]));
  return tokenizer.decode(ids);
}

}  // namespace brigade::train
