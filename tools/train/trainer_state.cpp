// The Trainer's checkpoints: every rank's stages gathered on the pipeline's rank 0, written with
// the settings that define the run, and read back (checked against this run's settings) on resume.
#include "trainer.h"

#include <charconv>
#include <filesystem>
#include <map>
#include <set>

#include "checkpoint_dir.h"
#include "comm/comm.h"
#include "core/error.h"
#include "core/factory.h"
#include "core/safetensors.h"
#include "nn/checkpoint.h"
#include "nn/gpt2_hf.h"
#include "text/tokenizer_files.h"
#include "text_task.h"

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
// The task's settings: the sort task's digits, or the text task's context and (padded) vocabulary;
// the data directory may move between runs, so its path only earns a note.
std::vector<Setting> settings_of(const TrainOptions& o, const Task& task, DType compute) {
  std::vector<Setting> task_settings;
  if (o.data.empty()) {
    task_settings = {{"--digits", std::to_string(o.digits), true}};
  } else {
    task_settings = {{"--context", std::to_string(o.context), true},
                     {"--vocab", std::to_string(task.vocab_size()), true},
                     {"--data", o.data, false}};
  }
  std::vector<Setting> settings = {
      {"--layers", std::to_string(o.layers), true},
      {"--heads", std::to_string(o.heads), true},
      {"--embd", std::to_string(o.embd), true},
      {"--batch", std::to_string(o.batch), true},
      {"--seed", std::to_string(o.seed), true},
      {"--steps", std::to_string(o.steps), false},
      {"--lr", exact(o.lr), false},
      {"--warmup", std::to_string(o.warmup), false},
      {"--weight-decay", exact(o.weight_decay), false},
      {"--clip", exact(o.clip), false},
      {"--precision", dtype_name(compute), false},
  };
  settings.insert(settings.begin() + 3, task_settings.begin(), task_settings.end());
  return settings;
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
      {"format", kFormat},
      {"step", std::to_string(step_)},
      {"data_position", std::to_string(position_)},
      {"first_loss", exact(first_loss_)}};
  for (const Setting& s : settings_of(options_, *task_, compute_dtype())) metadata[s.key()] = s.value;
  // A language model carries its tokenizer, so that the checkpoint is all `brigade generate` needs.
  if (const auto* lm = dynamic_cast<const TextTask*>(task_.get())) {
    metadata["tokenizer_vocab"] = std::to_string(lm->tokenizer_vocab());
    if (lm->tokenizer()) {
      metadata["tokenizer.vocab_json"] = text::vocab_json(*lm->tokenizer());
      metadata["tokenizer.merges_txt"] = text::merges_txt(*lm->tokenizer());
    }
  }
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
  for (const Setting& s : settings_of(options_, *task_, compute_dtype())) {
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
  // Checkpoints from before the position was saved were all of the sort task, which reads `batch`
  // rows per step.
  const int64_t position =
      ckpt.metadata.count("data_position") ? number("data_position", int64_t(0)) : step * options_.batch;
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
  position_ = position;
  first_loss_ = first_loss;
}

void Trainer::init_from(const std::string& path) {
  // A brigade checkpoint, or GPT-2 weights in the Hugging Face layout (nn/gpt2_hf.h).
  Safetensors file = load_safetensors(path);
  try {
    if (nn::is_hf_gpt2(file.tensors)) nn::load_hf_gpt2(*model_, file.tensors, path);
    else model_->load_state_dict(nn::checkpoint_from(std::move(file), path).model);
  } catch (const Error& e) {
    fail("--init-from ", path, ": its weights do not fit this model (", e.what(),
         "); the model flags (--model, --layers, --heads, --embd, --context, --vocab) must describe the model it holds");
  }
}

}  // namespace brigade::train
