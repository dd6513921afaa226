// The Trainer's checkpoints: every rank writes its own parameters' shard (sharded_save.h) with the
// settings that define the run, and on resume reads back only the parameters it holds (checked
// against this run's settings), whichever layout wrote them. Nothing is gathered: no rank ever holds
// another's parameters.
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
#include "nn/hf_model.h"
#include "nn/sharded_checkpoint.h"
#include "sharded_save.h"
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
  // "--layers"; the metadata key is the name without dashes. A setting no flag sets (what a preset
  // or a Hugging Face --init-from model brings) is named by its key, "norm_eps".
  const char* flag;
  std::string value;
  bool must_match;
  // What a checkpoint from before the setting existed had (it lacks the key): a must-match setting
  // with this value is then no mismatch. Null: the key is required.
  const char* before = nullptr;
  std::string key() const {
    const std::string f = flag;
    return f.starts_with("--") ? f.substr(2) : f;
  }
};

// LLaMA 3's rope scaling as the metadata records it ("none" without), and `brigade generate` reads it.
std::string llama3_text(const std::optional<RopeLlama3Scaling>& l3) {
  if (!l3) return "none";
  return exact(l3->factor) + " " + exact(l3->low_freq_factor) + " " + exact(l3->high_freq_factor) + " " +
         exact(l3->original_max_position_embeddings);
}

// `compute` is the dtype --precision resolved to (auto means different things on different devices);
// `vocab` the model's vocabulary (the task's padded one, or a Hugging Face --init-from model's).
// The task's settings: the sort task's digits, or the text task's context and (padded) vocabulary;
// the data directory may move between runs, so its path only earns a note.
std::vector<Setting> settings_of(const TrainOptions& o, const Task& task, int64_t vocab, DType compute) {
  std::vector<Setting> task_settings;
  if (o.data.empty()) {
    task_settings = {{"--digits", std::to_string(o.digits), true}};
  } else {
    task_settings = {{"--context", std::to_string(o.context), true},
                     {"--vocab", std::to_string(vocab), true},
                     {"--data", o.data, false}};
  }
  std::vector<Setting> settings = {
      {"--layers", std::to_string(o.layers), true},
      {"--heads", std::to_string(o.heads), true},
      {"--embd", std::to_string(o.embd), true},
      {"--arch", nn::arch_name(o.decoder.arch), true, "gpt2"},
      {"--kv-heads", std::to_string(o.decoder.kv_heads), true, "0"},
      {"--mlp-hidden", std::to_string(o.decoder.mlp_hidden), true, "0"},
      {"--rope-theta", exact(o.decoder.rope.theta), true, "10000"},
      {"--untied", o.decoder.untied ? "untied" : "tied", true, "tied"},
      {"rope_llama3", llama3_text(o.decoder.rope.llama3), true, "none"},
      {"norm_eps", exact(o.decoder.norm_eps), true, "1e-05"},
      {"attention_bias", o.decoder.attention_bias ? "true" : "false", true, "false"},
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

}  // namespace

void Trainer::save(const std::string& path) {
  ShardContents mine;
  for (auto& [name, p] : model_->named_parameters())
    if (owns(p)) mine.parameters.emplace(name, p);
  if (optimizer_) mine.optimizer = optimizer_->state_dict();
  std::map<std::string, std::string>& metadata = mine.metadata;
  if (is_leader()) {
    metadata = {{"format", kFormat},
                {"step", std::to_string(step_)},
                {"data_position", std::to_string(position_)},
                {"first_loss", exact(first_loss_)}};
    for (const Setting& s : settings_of(options_, *task_, config_.vocab_size, compute_dtype()))
      metadata[s.key()] = s.value;
    // A language model carries its tokenizer, so that the checkpoint is all `brigade generate` needs.
    if (const auto* lm = dynamic_cast<const TextTask*>(task_.get())) {
      metadata["tokenizer_vocab"] = std::to_string(lm->tokenizer_vocab());
      if (lm->tokenizer()) text::add_tokenizer_metadata(*lm->tokenizer(), metadata);
    }
  }
  save_sharded(path, step_, groups_, mine);
}

nn::Checkpoint Trainer::load_own_part(const std::string& path) {
  std::set<std::string> names;
  for (auto& [name, p] : model_->named_parameters())
    if (owns(p)) names.insert(name);
  std::error_code ec;
  const bool single = !std::filesystem::is_directory(path, ec);  // an older single file
  const nn::ShardedIndex index = single ? nn::ShardedIndex{} : nn::read_sharded_index(path);
  // The family before any tensor: another family's parameters would be reported as missing ones.
  const std::map<std::string, std::string> metadata = single ? read_safetensors_header(path).metadata : index.metadata;
  if (metadata.count("format") && metadata.at("format") == kFormat) {
    const std::string arch = metadata.count("arch") ? metadata.at("arch") : "gpt2";  // older ones: gpt2
    BRIGADE_CHECK(arch == nn::arch_name(options_.decoder.arch), path, ": the checkpoint was trained with --arch ", arch,
                  " but this run has --arch ", nn::arch_name(options_.decoder.arch), " (another model)");
  }
  if (single) return nn::load_checkpoint_part(path, names);
  return nn::load_sharded_checkpoint(path, index, &names);
}

void Trainer::resume(const std::string& path) {
  restore(load_own_part(path), "--resume " + path);
  resumed_from_ = path;
}

void Trainer::resume_newest(const std::string& dir) {
  // One rank chooses: ranks that looked on their own could see different files (a save landing
  // between two listings, a file one host reads and another does not) and resume different steps.
  NewestCheckpoint newest;
  if (is_leader()) newest = load_newest_checkpoint(dir);
  resume_warnings_ = newest.warnings;
  // The step and its form (sharded or a single file) in one number.
  const int64_t chosen = leaders_value(newest.step < 0 ? -1 : 2 * newest.step + (newest.sharded ? 1 : 0));
  if (chosen < 0) return;
  const int64_t step = chosen / 2;
  const std::string path = chosen % 2 ? checkpoint_path(dir, step) : legacy_checkpoint_path(dir, step);
  nn::Checkpoint ckpt = std::move(newest.checkpoint);  // the leader has read a single file already
  if (!is_leader() || chosen % 2) {
    try {
      ckpt = load_own_part(path);
    } catch (const Error& e) {
      const int rank = groups_ ? groups_->replica * groups_->pipeline->size() + groups_->pipeline->rank() : 0;
      fail("--save ", dir, ": rank ", rank, " cannot load ", path, ", the checkpoint rank 0 chose to resume from (",
           e.what(), "); the directory must be visible at the same path on every host (a shared directory)");
    }
  }
  restore(ckpt, "--save " + dir + ": resuming " + path);
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
  for (const Setting& s : settings_of(options_, *task_, config_.vocab_size, compute_dtype())) {
    // Checkpoints from before a setting existed lack its key; only the must-match ones are required.
    if ((!s.must_match || (s.before && s.value == s.before)) && !ckpt.metadata.count(s.key())) continue;
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
  // A rank loads the parameters it holds (a single-file checkpoint has the others too; a sharded one
  // was read for these alone), so it need not hold the whole model.
  nn::StateDict own;
  for (auto& [name, p] : model_->named_parameters()) {
    if (!owns(p)) continue;
    auto it = ckpt.model.find(name);
    BRIGADE_CHECK(it != ckpt.model.end(), context, ": the checkpoint has no parameter '", name, "'");
    own.emplace(name, it->second);
  }
  model_->load_state_dict(own, /*strict=*/false);
  // A pipeline rank takes the optimizer state of its own parameters ("<what>.<parameter name>").
  optim::StateDict optim;
  if (optimizer_) {
    std::set<std::string> mine;
    for (const auto& p : optimizer_->named_parameters()) mine.insert(p.first);
    for (auto& [key, t] : ckpt.optimizer) {
      const std::string parameter = optim::Optimizer::parameter_of_key(key);
      if (parameter.empty() || mine.count(parameter)) optim[key] = t;
    }
    optimizer_->load_state_dict(optim);
  }
  step_ = step;
  position_ = position;
  first_loss_ = first_loss;
}

void Trainer::init_from(const std::string& path) {
  // A brigade checkpoint (sharded or a single file), or a Hugging Face model, GPT-2 or LLaMA, one
  // file or sharded (nn/hf_model.h), of which a pipeline rank reads only its own layers' shards.
  // Either way a rank reads only its own parameters' bytes.
  try {
    if (const std::optional<nn::HfModel> hf = nn::find_hf_model(path)) nn::load_hf_model(*model_, *hf);
    else load_model_state(load_own_part(path).model);
  } catch (const Error& e) {
    fail("--init-from ", path, ": its weights do not fit this model (", e.what(),
         "); the model flags (--model, --layers, --heads, --embd, --context, --vocab) must describe the model of a "
         "brigade checkpoint (a Hugging Face model's own config.json describes it)");
  }
}

}  // namespace brigade::train
