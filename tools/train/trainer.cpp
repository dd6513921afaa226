#include "trainer.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <limits>
#include <map>
#include <functional>
#include <numeric>
#include <optional>
#include <thread>
#include <fstream>
#include <ostream>
#include <set>

#include "autograd/tape.h"
#include "checkpoint_dir.h"
#include "core/error.h"
#include "core/factory.h"
#include "core/format.h"
#include "core/parallel.h"
#include "nn/checkpoint.h"
#include "optim/clip_grad.h"
#include "pipeline/gpt_stages.h"
#include "comm/comm.h"
#include "core/stream.h"
#include "pipeline/analysis/simulator.h"
#include "pipeline/trace.h"
#include "progress.h"

namespace brigade::train {

namespace {

constexpr const char* kFormat = "brigade-train-1";  // metadata["format"] of our checkpoints

// The shortest text that reads back as exactly `v` ("0.003", not "0.0030000000000000001").
std::string exact(double v) {
  char buf[40];
  return std::string(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);  // 40 chars always suffice
}

// The settings a checkpoint records. `must_match` ones define the model and the data stream, so a
// run resumed with different values would be a different run; the others may change on resume.
struct Setting {
  const char* flag;  // "--layers"; the metadata key is the name without dashes
  std::string value;
  bool must_match;
  std::string key() const { return std::string(flag).substr(2); }
};

// `compute` is the dtype --precision resolved to (auto means different things on different devices).
std::vector<Setting> settings_of(const TrainOptions& o, DType compute) {
  return {
      {"--layers", std::to_string(o.layers), true},
      {"--heads", std::to_string(o.heads), true},
      {"--embd", std::to_string(o.embd), true},
      {"--digits", std::to_string(o.digits), true},
      {"--batch", std::to_string(o.batch), true},
      {"--seed", std::to_string(o.seed), true},
      {"--steps", std::to_string(o.steps), false},
      {"--lr", exact(o.lr), false},
      {"--warmup", std::to_string(o.warmup), false},
      {"--weight-decay", exact(o.weight_decay), false},
      {"--clip", exact(o.clip), false},
      {"--precision", dtype_name(compute), false},
  };
}

nn::GPTConfig gpt_config(const TrainOptions& o, const SortTask& task) {
  nn::GPTConfig c;
  c.vocab_size = task.vocab_size();
  c.block_size = task.sequence_length();
  c.n_layer = o.layers;
  c.n_head = o.heads;
  c.n_embd = o.embd;
  c.dropout = 0;  // the task has unlimited fresh data: nothing to regularise, and steps stay pure
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

// The compute dtype --precision asks for on `device` (see TrainOptions::precision).
DType resolve_precision(const std::string& precision, Device device) {
  if (precision == "bf16") return DType::bf16;
  if (precision == "f32") return DType::f32;
  return device.is_cuda() ? DType::bf16 : DType::f32;
}

// Messages of the checkpoint gather travel on tags far above the executor's (pipeline/executor.cpp).
constexpr int kGatherTag = 1 << 24;

// A list of names as an i32 tensor of characters, '\n'-separated (the transports move tensors only).
Tensor encode_names(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& n : names) text += n + '\n';
  Tensor t = zeros({int64_t(text.size())}, DType::i32);
  for (size_t i = 0; i < text.size(); ++i) t.data<int32_t>()[i] = int32_t(static_cast<unsigned char>(text[i]));
  return t;
}

std::vector<std::string> decode_names(const Tensor& t) {
  Tensor host = t.to(Device::cpu()).contiguous();
  std::vector<std::string> names(1);
  for (int64_t i = 0; i < host.numel(); ++i) {
    const char c = char(host.data<int32_t>()[i]);
    if (c == '\n') names.emplace_back();
    else names.back() += c;
  }
  names.pop_back();  // after the last '\n'
  return names;
}

// A copy on the host that training will not modify.
Tensor snapshot(const Tensor& t) { return t.device().is_cpu() ? t.clone() : t.to(Device::cpu()); }

}  // namespace

Trainer::Trainer(const TrainOptions& options, const pipeline::PipelineGroups* groups)
    : options_(options),
      task_(options.digits),
      groups_(groups),
      first_loss_(std::numeric_limits<double>::quiet_NaN()) {
  nn::GPTConfig config = gpt_config(options_, task_);
  config.device = resolve_device(options_.device);
  // Under `brigade launch` each process drives the GPU of its local rank, which its communicator
  // was made for: the model goes there too (not to cuda:0 in every process).
  if (groups_ != nullptr && config.device.is_cuda()) config.device = groups_->pipeline->device();
  config.compute_dtype = resolve_precision(options_.precision, config.device);
  model_ = std::make_shared<nn::GPT>(config);
  if (groups_ != nullptr) {
    const int P = groups_->pipeline->size();
    pipeline::Schedule schedule = pipeline::make_schedule(pipeline::parse_schedule_kind(options_.schedule), P,
                                                          int(options_.microbatches), int(options_.chunks));
    partition_ = choose_partition(schedule.stages());
    pipeline::GptStages mine = pipeline::gpt_stages(*model_, partition_, schedule.layout, groups_->pipeline->rank());
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

pipeline::Partition Trainer::choose_partition(int64_t stages) {
  const pipeline::Layers layers = model_->layers();
  if (options_.partition == "params") return pipeline::partition_by_parameters(layers, stages);
  if (options_.partition != "time") return pipeline::partition_uniform(int64_t(layers.size()), stages);
  // Timings differ from rank to rank (and run to run), and every rank must cut the model the same
  // way: the pipeline's rank 0 profiles one micro-batch and broadcasts its numbers.
  comm::Communicator& comm = *groups_->pipeline;
  Tensor costs = zeros({int64_t(layers.size())}, DType::f64, comm.device());
  if (comm.rank() == 0) {
    const int64_t rows = options_.batch / options_.replicas / options_.microbatches;
    SortTask::Batch sample = task_.batch(options_.seed, Split::train, 0, rows);
    const std::vector<double> seconds = pipeline::profile_layers(layers, sample.inputs.to(model_->config().device));
    costs = from_vector(seconds, {int64_t(seconds.size())}, DType::f64, comm.device());
  }
  comm.broadcast(costs, 0);  // (profile_layers leaves no gradients behind)
  // Data-parallel replicas must cut alike too (their gradients are averaged parameter by parameter):
  // replica 0's numbers win.
  if (groups_->replicas) groups_->replicas->broadcast(costs, 0);
  return pipeline::partition_by_cost(costs.to_vector(), stages, "seconds");
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
    SortTask::Batch batch =
        task_.batch(options_.seed, Split::train, uint64_t(step_ * B + pipe_->replica() * share), share);
    std::vector<Tensor> inputs = pipeline::split_microbatches(batch.inputs.to(device), int(options_.microbatches));
    std::vector<Tensor> targets = pipeline::split_microbatches(batch.targets.to(device), int(options_.microbatches));
    value = pipe_->forward_backward(inputs, targets).loss;
  } else {
    SortTask::Batch batch = task_.batch(options_.seed, Split::train, uint64_t(step_ * B), B);
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
  if (step_ == 1) first_loss_ = value;
  return value;
}

std::pair<nn::StateDict, optim::StateDict> Trainer::gather_state() {
  if (!pipe_) return {model_->state_dict(), optimizer_->state_dict()};
  if (groups_->replica != 0) return {};  // every replica holds the same values
  comm::Communicator& comm = *groups_->pipeline;
  if (comm.rank() != 0) {
    // Everything this rank alone knows: its parameters and their optimizer state.
    std::vector<std::string> names;
    std::vector<Tensor> tensors;
    for (auto& [name, p] : model_->named_parameters()) {
      if (!owns(p)) continue;
      names.push_back("model:" + name);
      tensors.push_back(p);
    }
    for (auto& [key, t] : optimizer_ ? optimizer_->state_dict() : optim::StateDict{}) {
      names.push_back("optim:" + key);
      tensors.push_back(t);
    }
    // Everything travels on the communicator's device: the names are made on the host, and the
    // optimizer's step and lr are host scalars even when the parameters live on a GPU.
    const Device on = comm.device();
    comm.send(encode_names(names).to(on), 0, kGatherTag, comm::Shapes::varying);
    // Copies: the local transport hands the tensor itself over, and training goes on modifying it.
    for (const Tensor& t : tensors) comm.send(t.device() == on ? t.clone() : t.to(on), 0, kGatherTag + 1, comm::Shapes::varying);
    return {};
  }
  nn::StateDict model;
  for (auto& [name, t] : model_->state_dict()) model[name] = snapshot(t);
  optim::StateDict optim = optimizer_ ? optimizer_->state_dict() : optim::StateDict{};
  for (int r = 1; r < comm.size(); ++r) {
    for (const std::string& entry : decode_names(comm.recv(r, kGatherTag, comm::Shapes::varying))) {
      Tensor t = snapshot(comm.recv(r, kGatherTag + 1, comm::Shapes::varying));
      // "step" and "lr" are the same on every rank, as are the tied weight's copies: first one wins.
      if (entry.rfind("model:", 0) == 0) model[entry.substr(6)] = t;
      else optim.emplace(entry.substr(6), t);
    }
  }
  return {model, optim};
}

void Trainer::save(const std::string& path) {
  auto [model, optim] = gather_state();
  if (!is_leader()) return;
  std::map<std::string, std::string> metadata = {
      {"format", kFormat}, {"step", std::to_string(step_)}, {"first_loss", exact(first_loss_)}};
  for (const Setting& s : settings_of(options_, compute_dtype())) metadata[s.key()] = s.value;
  nn::save_checkpoint(path, model, optim, metadata);
}

void Trainer::resume(const std::string& path) {
  restore(nn::load_checkpoint(path), "--resume " + path);
  resumed_from_ = path;
}

void Trainer::resume_newest(const std::string& dir) {
  // One rank chooses: ranks that looked on their own could see different files (a save landing
  // between two listings, a file one host reads and another does not) and resume different steps.
  NewestCheckpoint newest;
  if (is_leader()) newest = load_newest_checkpoint(dir);
  resume_warnings_ = newest.warnings;
  const int64_t step = leaders_value(newest.step);
  if (step < 0) return;
  const std::string path = checkpoint_path(dir, step);
  if (newest.step < 0) {
    try {
      newest.checkpoint = nn::load_checkpoint(path);
    } catch (const Error& e) {
      const int rank = groups_->replica * groups_->pipeline->size() + groups_->pipeline->rank();
      fail("--save ", dir, ": rank ", rank, " cannot load ", path, ", the checkpoint rank 0 chose to resume from (",
           e.what(), "); the directory must be visible at the same path on every host (a shared directory)");
    }
  }
  restore(newest.checkpoint, "--save " + dir + ": resuming " + path);
  resumed_from_ = path;
}

int64_t Trainer::leaders_value(int64_t value) {
  if (groups_ == nullptr) return value;
  // Down the leader's pipeline, then from replica 0 to the others (as choose_partition does).
  Tensor t = from_vector(std::vector<double>{double(value)}, {1}, DType::i64, groups_->pipeline->device());
  groups_->pipeline->broadcast(t, 0);
  if (groups_->replicas) groups_->replicas->broadcast(t, 0);
  return int64_t(t.to_vector()[0]);
}

void Trainer::restore(const nn::Checkpoint& ckpt, const std::string& context) {
  auto meta = [&](const std::string& key) -> const std::string& {
    auto it = ckpt.metadata.find(key);
    BRIGADE_CHECK(it != ckpt.metadata.end(), context, ": not a `brigade train` checkpoint (no '", key,
                  "' in its metadata)");
    return it->second;
  };
  BRIGADE_CHECK(meta("format") == kFormat, context, ": unknown checkpoint format '", meta("format"),
                "' (expected ", kFormat, ")");
  for (const Setting& s : settings_of(options_, compute_dtype())) {
    // Checkpoints from before a setting existed lack its key; only the must-match ones are required.
    if (!s.must_match && !ckpt.metadata.count(s.key())) continue;
    const std::string& saved = meta(s.key());
    if (saved == s.value) continue;
    BRIGADE_CHECK(!s.must_match, context, ": the checkpoint was trained with ", s.flag, " ", saved,
                  " but this run has ", s.flag, " ", s.value, " (model, task and data settings must match)");
    resume_notes_.push_back(std::string(s.flag) + ": " + saved + " in the checkpoint, now " + s.value);
  }
  auto number = [&](const std::string& key, auto value) {
    const std::string& text = meta(key);
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    BRIGADE_CHECK(ec == std::errc() && end == text.data() + text.size(), context, ": bad '", key,
                  "' in its metadata: '", text, "'");
    return value;
  };
  const int64_t step = number("step", int64_t(0));
  BRIGADE_CHECK(step >= 0 && step <= options_.steps, context, ": the checkpoint is at step ", step,
                ", past --steps ", options_.steps);
  const double first_loss = number("first_loss", 0.0);
  model_->load_state_dict(ckpt.model);
  // A pipeline rank takes the optimizer state of its own parameters ("<what>.<parameter name>").
  optim::StateDict optim;
  if (optimizer_) {
    std::set<std::string> mine;
    for (const auto& p : optimizer_->named_parameters()) mine.insert(p.first);
    for (auto& [key, t] : ckpt.optimizer) {
      const size_t dot = key.find('.');
      if (dot == std::string::npos || mine.count(key.substr(dot + 1))) optim[key] = t;
    }
    optimizer_->load_state_dict(optim);
  }
  step_ = step;
  first_loss_ = first_loss;
}

Accuracy Trainer::evaluate(int64_t examples) {
  if (!pipe_) return evaluate_sorting(*model_, task_, options_.seed, examples);
  auto [model, optim] = gather_state();
  if (!is_leader()) return {};
  // The leader's GPT copy holds its own stages' live weights; the rest are stale until loaded here.
  model_->load_state_dict(model);
  return evaluate_sorting(*model_, task_, options_.seed, examples);
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// "3 1 4 1 | 1 1 3 4": one example as text, for the header.
std::string show_example(const SortTask& task, uint64_t seed) {
  std::string s;
  for (int64_t token : task.example(seed, Split::held_out, 0)) {
    if (!s.empty()) s += ' ';
    s += token == SortTask::kSeparator ? std::string("|") : std::to_string(token);
  }
  return s;
}

std::string scientific(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1e", v);
  return buf;
}

void print_header(Trainer& trainer, std::ostream& out) {
  const TrainOptions& o = trainer.options();
  const SortTask& task = trainer.task();
  out << "task: sort " << o.digits << " digits, e.g. " << show_example(task, o.seed) << "\n";
  out << "model: GPT, " << o.layers << " layers, " << o.heads << " heads, " << o.embd << " wide, "
      << with_commas(trainer.model().parameter_count()) << " parameters (sequence length "
      << task.sequence_length() << ", vocabulary " << task.vocab_size() << ")\n";
  out << "optimizer: AdamW, lr " << scientific(o.lr) << " (warm-up " << std::min(o.warmup, o.steps)
      << " steps, cosine to " << scientific(o.lr * TrainOptions::min_lr_ratio) << "), weight decay "
      << o.weight_decay << ", clip " << o.clip << "\n";
  if (trainer.pipelined()) {
    const pipeline::Schedule& schedule = trainer.schedule();
    out << "pipeline: " << schedule.stages() << " stages on " << schedule.ranks() << " ranks ("
        << (comm::read_launch_env().world_size > 1 ? "processes" : "threads") << "), schedule " << schedule.name
        << ", " << schedule.microbatches << " micro-batches of " << o.batch / o.replicas / o.microbatches
        << " sequences" << (schedule.chunks() > 1 ? ", " + std::to_string(schedule.chunks()) + " chunks per rank" : "")
        << (o.replicas > 1 ? ", " + std::to_string(o.replicas) + " data-parallel replicas" : "")
        << (o.recompute ? ", recomputation on" : "") << "\n";
    out << pipeline::describe_partition(trainer.partition(), trainer.model().layers(), schedule.ranks());
  }
  const nn::GPTConfig& config = trainer.model().config();
  out << "run: " << o.steps << " steps of " << o.batch << " sequences, seed " << o.seed << ", " << o.device
      << " (" << config.device.str() << "), "
      << (config.compute_dtype == DType::bf16 ? "bf16 compute with f32 master weights" : "f32") << ", "
      << num_threads() << " threads\n";
}

}  // namespace

// Fails before training rather than after it when the checkpoint could never be written.
void check_save_path(const std::string& path) {
  if (path.empty()) return;
  if (is_checkpoint_dir(path)) return make_checkpoint_dir(path);
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  BRIGADE_CHECK(std::filesystem::is_directory(dir), "--save ", path, ": the directory ", dir.string(),
                " does not exist");
}

void report_timeline(Trainer& trainer, const TrainOptions& options, std::ostream& out);

namespace {

// Where the run continues from, and why there.
void print_resume(const Trainer& trainer, std::ostream& out) {
  const TrainOptions& o = trainer.options();
  const bool save_dir = is_checkpoint_dir(o.save);
  if (save_dir && !o.resume.empty()) out << "--resume given: the checkpoints in " << o.save << " are not used\n";
  for (const std::string& warning : trainer.resume_warnings()) out << "warning: " << warning << "\n";
  if (!trainer.resumed_from().empty()) {
    out << "resumed from " << trainer.resumed_from() << " at step " << trainer.step() << "\n";
    for (const std::string& note : trainer.resume_notes()) out << "note: " << note << "\n";
  } else if (save_dir) {
    out << "no checkpoint to resume in " << o.save << "; starting at step 0\n";
  }
}

// Every rank calls it (the leader gathers the state); the leader writes and, in a --save directory,
// deletes the checkpoints beyond --keep once the new one is complete.
void save_checkpoint(Trainer& trainer, std::ostream& out) {
  const TrainOptions& o = trainer.options();
  const bool save_dir = is_checkpoint_dir(o.save);
  const std::string path = save_dir ? checkpoint_path(o.save, trainer.step()) : o.save;
  trainer.save(path);
  if (save_dir && trainer.is_leader()) prune_checkpoints(o.save, trainer.step(), o.keep);
  out << "saved " << path << " at step " << trainer.step() << "\n";
  out.flush();  // a launcher's log (or a test) watching for checkpoints sees it now, not steps later
}

// The loop every rank runs; only the leader's `out` is a real stream.
TrainSummary train_rank(const TrainOptions& options, const pipeline::PipelineGroups* groups, std::ostream& out) {
  const auto run_start = Clock::now();
  Trainer trainer(options, groups);
  print_header(trainer, out);
  print_resume(trainer, out);
  out.flush();

  // One batch's loss is noisy; progress lines show the mean since the previous line, and the final
  // comparison uses the mean of the last few steps.
  const int64_t tokens_per_step = options.batch * trainer.task().sequence_length();
  const int64_t start_step = trainer.step();
  const size_t tail_steps = 10;
  std::deque<double> tail;
  double window_loss = 0;
  int64_t window_steps = 0;
  auto window_start = Clock::now();
  const auto train_start = Clock::now();

  while (trainer.step() < options.steps) {
    if (trainer.step() + 1 == options.steps) trainer.set_trace(true);  // the last step's timeline
    const double loss = trainer.train_step();
    const int64_t step = trainer.step();
    window_loss += loss;
    ++window_steps;
    tail.push_back(loss);
    if (tail.size() > tail_steps) tail.pop_front();

    if (step % options.log_every == 0 || step == options.steps) {
      const double seconds_per_step = seconds_since(train_start) / double(step - start_step);
      StepReport report;
      report.step = step;
      report.steps = options.steps;
      report.loss = window_loss / double(window_steps);
      report.lr = trainer.lr_at(step - 1);
      report.tokens_per_second = double(window_steps * tokens_per_step) / seconds_since(window_start);
      report.eta_seconds = seconds_per_step * double(options.steps - step);
      out << format_step(report) << "\n";
      out.flush();
      window_loss = 0;
      window_steps = 0;
      window_start = Clock::now();
    }
    if (options.save_every > 0 && step % options.save_every == 0 && step < options.steps) save_checkpoint(trainer, out);
  }
  const double train_seconds = seconds_since(train_start);
  const int64_t steps_run = trainer.step() - start_step;
  if (trainer.pipelined() && steps_run > 0) report_timeline(trainer, options, out);
  if (!options.save.empty()) save_checkpoint(trainer, out);

  TrainSummary summary;
  summary.steps = trainer.step();
  summary.first_loss = trainer.first_loss();
  summary.last_loss = std::numeric_limits<double>::quiet_NaN();
  if (!tail.empty()) summary.last_loss = std::accumulate(tail.begin(), tail.end(), 0.0) / double(tail.size());
  summary.accuracy = trainer.evaluate(options.eval_examples);

  char line[200];
  if (steps_run == 0) {
    out << "no steps to run: the checkpoint is already at step " << trainer.step() << " of " << options.steps << "\n";
  } else {
    std::snprintf(line, sizeof line, "loss: %.4f at step 1 -> %.4f over the last %zu steps (%+.1f%%)",
                  summary.first_loss, summary.last_loss, tail.size(),
                  100.0 * (summary.last_loss - summary.first_loss) / summary.first_loss);
    out << line << "\n";
  }
  std::snprintf(line, sizeof line,
                "held-out accuracy (%lld unseen sequences, greedy decoding): %.1f%% sorted exactly, %.1f%% of "
                "digits right",
                (long long)summary.accuracy.examples, 100.0 * summary.accuracy.sequences,
                100.0 * summary.accuracy.tokens);
  out << line << "\n";
  out << "time: " << format_duration(seconds_since(run_start)) << " in all";
  if (steps_run > 0) {
    std::snprintf(line, sizeof line, ", %lld steps in %s (%.0f tok/s)", (long long)steps_run,
                  format_duration(train_seconds).c_str(), double(steps_run * tokens_per_step) / train_seconds);
    out << line;
  }
  out << "\n";
  return summary;
}

// An output stream that drops everything: what the ranks other than the leader print to.
std::ostream& null_stream() {
  static std::ofstream sink;  // never opened: every write fails silently
  return sink;
}

bool enabled(const std::string& path) { return !path.empty() && path != "none"; }

}  // namespace

void report_timeline(Trainer& trainer, const TrainOptions& options, std::ostream& out) {
  const pipeline::Trace& trace = trainer.last_trace();
  if (!trainer.is_leader() || trace.events.empty()) return;
  const pipeline::Schedule& schedule = trainer.schedule();
  // The mean measured cost of each compute kind: a simulation with this machine's costs.
  const pipeline::Costs measured_costs = pipeline::simulator_costs(pipeline::mean_action_costs({trace}));
  const pipeline::SimulationResult unit = pipeline::simulate(schedule);
  const pipeline::SimulationResult predicted = pipeline::simulate(schedule, measured_costs);
  const pipeline::SimulationResult measured = pipeline::to_simulation(trace, schedule, &predicted);
  char line[300];
  std::snprintf(line, sizeof line,
                "bubble (last step): measured %.3f; simulator %.3f with unit costs, %.3f with the measured costs "
                "(F %.2f ms, B %.2f ms)",
                trace.measured_bubble(), unit.bubble_fraction, predicted.bubble_fraction,
                1e3 * measured_costs.forward, 1e3 * measured_costs.full_backward());
  out << line << "\n";
  if (enabled(options.trace)) {
    pipeline::save_chrome_trace(options.trace, trace, schedule);
    out << "trace: " << options.trace << " (open in ui.perfetto.dev)\n";
  }
  if (enabled(options.svg)) {
    pipeline::save_timeline_svg_compare(options.svg, schedule, predicted, measured,
                                        "simulated with the measured mean costs", "measured (last step)", "s");
    out << "timeline: " << options.svg << " (simulated above, measured below)\n";
  }
}

TrainSummary run_training(const TrainOptions& options_in, std::ostream& out) {
  TrainOptions options = options_in;
  check_save_path(options.save);
  if (options.threads > 0) set_num_threads(options.threads);
  if (options.stages == 0) return train_rank(options, nullptr, out);

  const int P = int(options.stages);
  const comm::LaunchEnv env = comm::read_launch_env();
  if (env.world_size > 1) {
    // Started by `brigade launch -n N` (or torchrun, srun): this process is one rank of N = P * R.
    BRIGADE_CHECK(env.world_size % P == 0, "brigade train: ", env.world_size, " processes cannot form pipelines of --stages ",
                  P, " (the number of processes must be a multiple of the number of stages)");
    const int64_t R = env.world_size / P;
    BRIGADE_CHECK(options_in.replicas == 1 || options_in.replicas == R, "brigade train: --replicas ", options_in.replicas,
                  " disagrees with ", env.world_size, " processes / ", P, " stages = ", R);
    options.replicas = R;
    BRIGADE_CHECK(options.batch % (R * options.microbatches) == 0, "brigade train: a batch of ", options.batch,
                  " does not split into ", R, " replicas x ", options.microbatches, " micro-batches");
    comm::ConnectOptions connect;
    Device device = resolve_device(options.device);
    connect.device = device.is_cuda() ? comm::local_device(env) : Device::cpu();
    auto world = comm::connect(env, connect);
    auto groups = pipeline::PipelineGroups::split(*world, P);
    const bool leader = world->rank() == 0;
    return train_rank(options, groups.get(), leader ? out : null_stream());
  }

  // One process: every rank a thread, on the GPU each with its own stream.
  const int world_size = int(P * options.replicas);
  const Device device = resolve_device(options.device);
  auto world = comm::local_group(std::vector<Device>(size_t(world_size), device));
  std::vector<std::string> errors(static_cast<size_t>(world_size));
  TrainSummary summary;
  std::vector<std::thread> threads;
  for (int r = 0; r < world_size; ++r) {
    threads.emplace_back([&, r] {
      try {
        Stream stream;
        std::optional<StreamGuard> on_stream;
        if (device.is_cuda()) {
          stream = Stream::create(device);
          on_stream.emplace(stream);
        }
        auto groups = pipeline::PipelineGroups::split(*world[size_t(r)], P);
        TrainSummary mine = train_rank(options, groups.get(), r == 0 ? out : null_stream());
        if (r == 0) summary = mine;
      } catch (const std::exception& e) {
        errors[size_t(r)] = e.what();
        world[size_t(r)]->abort("rank " + std::to_string(r) + " failed: " + e.what());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  // The first rank that failed on its own (not because another aborted) has the real story.
  for (const std::string& e : errors)
    if (!e.empty() && e.find("failed:") == std::string::npos && e.find("abort") == std::string::npos) fail(e);
  for (const std::string& e : errors)
    if (!e.empty()) fail(e);
  return summary;
}

}  // namespace brigade::train
