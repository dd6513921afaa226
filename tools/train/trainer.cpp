// The Trainer's model, optimizer and steps. Its checkpoints (gather, save, resume) are in
// trainer_state.cpp; the `brigade train` run around it (progress, saving, reports) in run.cpp.
#include "trainer.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "autograd/tape.h"
#include "checkpoint_dir.h"
#include "core/error.h"
#include "core/factory.h"
#include "core/format.h"
#include "core/parallel.h"
#include "optim/clip_grad.h"
#include "pipeline/analysis/simulator.h"
#include "pipeline/gpt_stages.h"
#include "pipeline/schedule_csv.h"
#include "comm/comm.h"
#include "core/stream.h"
#include "pipeline/trace.h"
#include "text_task.h"

namespace brigade::train {

namespace {

nn::GPTConfig gpt_config(const TrainOptions& o, const Task& task) {
  nn::GPTConfig c;
  c.vocab_size = task.vocab_size();
  c.block_size = task.sequence_length();
  c.n_layer = o.layers;
  c.n_head = o.heads;
  c.n_embd = o.embd;
  c.dropout = 0;  // keeps every step a pure function of the data: resumes are exact
  c.seed = o.seed;
  return c;
}

// GPT-2's recipe: weight decay on the matrices (embeddings, projections) only; decaying biases and
// norm gains towards zero just fights the normalisation. `mine` picks this rank's parameters.
std::vector<optim::ParamGroup> param_groups(const nn::GPT& model, const std::function<bool(const Tensor&)>& mine) {
  optim::ParamGroup decayed, not_decayed;
  not_decayed.weight_decay = 0.0;
  for (auto& [name, p] : model.named_parameters())
    if (mine(p)) (p.dim() >= 2 ? decayed : not_decayed).params.emplace_back(name, p);
  return {decayed, not_decayed};
}

// The compute dtype --precision asks for on `device` (see TrainOptions::precision).
DType resolve_precision(const std::string& precision, Device device) {
  if (precision == "bf16") return DType::bf16;
  if (precision == "f32") return DType::f32;
  return device.is_cuda() ? DType::bf16 : DType::f32;
}

std::unique_ptr<Task> make_task(const TrainOptions& o) {
  if (o.data.empty()) return std::make_unique<SortTask>(o.digits, o.seed);
  return std::make_unique<TextTask>(o.data, o.context, o.vocab, o.seed);
}

}  // namespace

Device resolve_device(const std::string& device) {
#ifdef BRIGADE_HAVE_CUDA
  const bool built_with_cuda = true;
#else
  const bool built_with_cuda = false;
#endif
  if (device == "cpu") return Device::cpu();
  if (device == "auto") return built_with_cuda && cuda_available() ? Device::cuda(0) : Device::cpu();
  if (!built_with_cuda) {
    fail("--device ", device, ": this build has no CUDA backend (nvcc was not found, or it was configured with "
         "-Dcuda=disabled); use --device cpu");
  }
  if (!cuda_available()) fail("--device ", device, ": no CUDA device is visible on this machine; use --device cpu");
  return Device::parse(device);
}

Trainer::Trainer(const TrainOptions& options, const pipeline::PipelineGroups* groups)
    : options_(options),
      task_(make_task(options)),
      groups_(groups),
      first_loss_(std::numeric_limits<double>::quiet_NaN()) {
  nn::GPTConfig config = gpt_config(options_, *task_);
  config.device = resolve_device(options_.device);
  // Under `brigade launch` each process drives the GPU of its local rank, which its communicator
  // was made for: the model goes there too (not to cuda:0 in every process).
  if (groups_ != nullptr && config.device.is_cuda()) config.device = groups_->pipeline->device();
  config.compute_dtype = resolve_precision(options_.precision, config.device);
  model_ = std::make_shared<nn::GPT>(config);
  if (groups_ != nullptr) {
    const int P = groups_->pipeline->size();
    pipeline::Schedule schedule =
        options_.schedule_file.empty()
            ? pipeline::make_schedule(pipeline::parse_schedule_kind(options_.schedule), P, int(options_.microbatches),
                                      int(options_.chunks_or_default()))
            : pipeline::schedule_from_file(pipeline::read_schedule_csv(options_.schedule_file));
    const nn::LayerGrain grain = options_.partition == "balanced" ? nn::LayerGrain::half_block : nn::LayerGrain::block;
    layers_ = model_->layers(grain);
    partition_ = choose_partition(schedule);
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

pipeline::Partition Trainer::choose_partition(const pipeline::Schedule& schedule) {
  const int64_t stages = schedule.stages();
  if (options_.partition == "params") return pipeline::partition_by_parameters(layers_, stages);
  if (options_.partition == "balanced") return balanced_partition(schedule);
  if (options_.partition != "time") return pipeline::partition_uniform(int64_t(layers_.size()), stages);
  std::vector<double> seconds;
  for (const pipeline::LayerProfile& p : shared_layer_profile()) seconds.push_back(p.seconds);
  return pipeline::partition_by_cost(seconds, stages, "seconds");
}

std::vector<pipeline::LayerProfile> Trainer::shared_layer_profile() {
  // Timings differ from rank to rank (and run to run), and every rank must cut the model the same
  // way: the pipeline's rank 0 profiles one micro-batch and broadcasts its numbers.
  comm::Communicator& comm = *groups_->pipeline;
  const int64_t n = int64_t(layers_.size());
  Tensor numbers = zeros({2 * n}, DType::f64, comm.device());  // n seconds, then n stash sizes
  if (comm.rank() == 0) {
    const int64_t rows = options_.batch / options_.replicas / options_.microbatches;
    Batch sample = task_->train_batch(0, rows);
    std::vector<double> flat;
    const auto profile = pipeline::profile_layer_costs(layers_, sample.inputs.to(model_->config().device));
    for (const pipeline::LayerProfile& p : profile) flat.push_back(p.seconds);
    for (const pipeline::LayerProfile& p : profile) flat.push_back(double(p.stash_bytes));
    numbers = from_vector(flat, {2 * n}, DType::f64, comm.device());
  }
  comm.broadcast(numbers, 0);  // (profile_layers leaves no gradients behind)
  // Data-parallel replicas must cut alike too (their gradients are averaged parameter by parameter):
  // replica 0's numbers win.
  if (groups_->replicas) groups_->replicas->broadcast(numbers, 0);
  const std::vector<double> flat = numbers.to_vector();
  std::vector<pipeline::LayerProfile> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[size_t(i)] = {flat[size_t(i)], int64_t(flat[size_t(n + i)])};
  return out;
}

pipeline::Partition Trainer::balanced_partition(const pipeline::Schedule& schedule) {
  const std::vector<pipeline::LayerProfile> profile = shared_layer_profile();
  std::vector<double> seconds;
  std::vector<pipeline::LayerMemory> memory;
  int64_t whole_model = 0;  // every rank builds the whole model (gpt_stages.h): its parameters are everywhere
  for (const Tensor& p : model_->parameters()) whole_model += int64_t(p.nbytes());
  for (size_t i = 0; i < layers_.size(); ++i) {
    seconds.push_back(profile[i].seconds);
    pipeline::LayerMemory m;
    for (const Tensor& p : layers_[i]->parameters()) {
      // Its gradient and AdamW's two f32 moments, on the rank whose stage holds the layer.
      if (p.requires_grad()) m.fixed += int64_t(p.nbytes()) + 2 * p.numel() * 4;
    }
    // With recomputation a stage keeps only its input per micro-batch, whatever its layers.
    m.activations = options_.recompute ? 0 : profile[i].stash_bytes;
    memory.push_back(m);
  }
  int64_t budget = std::numeric_limits<int64_t>::max() / 4;  // no limit: time alone decides
  if (options_.memory_budget > 0) {
    budget = options_.memory_budget - whole_model;
    BRIGADE_CHECK(budget > 0, "--memory-budget ", format_bytes(double(options_.memory_budget)),
                  " is less than the whole model's parameters (", format_bytes(double(whole_model)),
                  "), which every rank holds");
  }
  // How many micro-batches each stage stashes at once is the schedule's, whatever the split.
  const pipeline::SimulationResult simulated = pipeline::simulate(schedule);
  return pipeline::partition_within_memory(
      seconds, memory, pipeline::memory_limit(schedule.layout, simulated.peak_activations, budget), "seconds");
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
    Batch batch = task_->train_batch(position_, B);
    Tape tape;
    Tensor loss = tape.record([&] { return model_->loss(batch.inputs.to(device), batch.targets.to(device)); });
    tape.backward(loss);
    value = loss.item();
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

nn::GPT* Trainer::whole_model() {
  if (!pipe_) return model_.get();
  auto [model, optim] = gather_state();
  if (!is_leader()) return nullptr;
  // The leader's GPT copy holds its own stages' live weights; the rest are stale until loaded here.
  model_->load_state_dict(model);
  return model_.get();
}

Accuracy Trainer::evaluate(int64_t examples) {
  const auto* sort = dynamic_cast<const SortTask*>(task_.get());
  BRIGADE_CHECK(sort != nullptr, "brigade train: held-out accuracy is the sort task's measure; --data runs report "
                "validation loss");
  nn::GPT* model = whole_model();
  return model ? evaluate_sorting(*model, *sort, options_.seed, examples) : Accuracy{};
}

double Trainer::validation_loss(int64_t windows) {
  const auto* lm = dynamic_cast<const TextTask*>(task_.get());
  BRIGADE_CHECK(lm != nullptr && lm->validation() != nullptr,
                "brigade train: no validation shards to measure a validation loss on");
  nn::GPT* model = whole_model();
  if (model == nullptr) return std::numeric_limits<double>::quiet_NaN();
  return mean_loss(*model, *lm->validation(), std::min(windows, lm->validation()->windows()), options_.batch);
}

std::string Trainer::sample(int64_t tokens, uint64_t seed) {
  const auto* lm = dynamic_cast<const TextTask*>(task_.get());
  BRIGADE_CHECK(lm != nullptr && lm->tokenizer(), "brigade train: no tokenizer to write a sample with");
  nn::GPT* model = whole_model();
  if (model == nullptr) return "";
  const text::Tokenizer& tokenizer = *lm->tokenizer();
  // A new document, as every document `brigade data prepare` writes starts; a tokenizer without
  // <|endoftext|> starts from its token 0.
  const double start = tokenizer.has_eot() ? double(tokenizer.eot_id()) : 0.0;
  const Tensor prompt = full({1, 1}, start, DType::i64, model->config().device);
  nn::GenerateOptions g;
  g.temperature = 0.8;
  g.top_k = 40;
  g.seed = seed;
  // Only ids the tokenizer can decode: not the padding, nor ids a larger --vocab adds.
  g.vocab_limit = std::min(lm->tokenizer_vocab(), int64_t(tokenizer.vocab_size()));
  const bool was_training = model->is_training();
  model->eval();
  const std::vector<double> out = model->generate(prompt, std::min(tokens, model->config().block_size - 1), g).to_vector();
  model->train(was_training);
  std::vector<text::TokenId> ids;
  for (size_t i = 1; i < out.size(); ++i) ids.push_back(text::TokenId(out[i]));
  return tokenizer.decode(ids);
}

}  // namespace brigade::train
