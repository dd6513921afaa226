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
#include <numeric>
#include <ostream>

#include "autograd/tape.h"
#include "core/error.h"
#include "core/parallel.h"
#include "nn/checkpoint.h"
#include "optim/clip_grad.h"
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

std::vector<Setting> settings_of(const TrainOptions& o) {
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
// norm gains towards zero just fights the normalisation.
std::vector<optim::ParamGroup> param_groups(const nn::GPT& model) {
  optim::ParamGroup decayed, not_decayed;
  not_decayed.weight_decay = 0.0;
  for (auto& [name, p] : model.named_parameters()) (p.dim() >= 2 ? decayed : not_decayed).params.emplace_back(name, p);
  return {decayed, not_decayed};
}

void check_device(const std::string& device) {
  if (device == "cpu") return;
#ifdef BRIGADE_HAVE_CUDA
  const bool built_with_cuda = true;
#else
  const bool built_with_cuda = false;
#endif
  if (!built_with_cuda) {
    fail("--device ", device, ": this build has no CUDA backend (nvcc was not found, or it was configured with "
         "-Dcuda=disabled); use --device cpu");
  }
  if (!cuda_available()) fail("--device ", device, ": no CUDA device is visible on this machine; use --device cpu");
  fail("--device ", device, ": the CUDA kernels are not part of this build yet (they arrive with the CUDA backend); "
       "use --device cpu");
}

}  // namespace

Trainer::Trainer(const TrainOptions& options)
    : options_(options), task_(options.digits), first_loss_(std::numeric_limits<double>::quiet_NaN()) {
  check_device(options_.device);
  model_ = std::make_shared<nn::GPT>(gpt_config(options_, task_));
  optim::AdamWOptions adamw;
  adamw.lr = options_.lr;
  adamw.weight_decay = options_.weight_decay;
  optimizer_ = std::make_unique<optim::AdamW>(param_groups(*model_), adamw);
  schedule_.base_lr = options_.lr;
  schedule_.min_lr = options_.lr * TrainOptions::min_lr_ratio;
  schedule_.total_steps = options_.steps;
  schedule_.warmup_steps = std::min(options_.warmup, options_.steps);
  if (!options_.resume.empty()) resume(options_.resume);
}

double Trainer::train_step() {
  const int64_t B = options_.batch;
  SortTask::Batch batch = task_.batch(options_.seed, Split::train, uint64_t(step_ * B), B);

  Tape tape;
  Tensor loss;
  {
    TapeGuard recording(tape);
    loss = model_->loss(batch.inputs, batch.targets);
  }
  tape.backward(loss);
  const double value = loss.item();
  if (options_.clip > 0) {
    double norm = optim::clip_grad_norm(optimizer_->parameters(), options_.clip);
    BRIGADE_CHECK(std::isfinite(norm), "training diverged at step ", step_ + 1, ": the gradient norm is ", norm,
                  " (loss ", value, "); try a lower --lr");
  }
  optimizer_->set_lr(schedule_.lr(step_));
  optimizer_->step();
  optimizer_->zero_grad();

  ++step_;
  if (step_ == 1) first_loss_ = value;
  return value;
}

void Trainer::save(const std::string& path) const {
  std::map<std::string, std::string> metadata = {
      {"format", kFormat}, {"step", std::to_string(step_)}, {"first_loss", exact(first_loss_)}};
  for (const Setting& s : settings_of(options_)) metadata[s.key()] = s.value;
  nn::save_checkpoint(path, model_->state_dict(), optimizer_->state_dict(), metadata);
}

void Trainer::resume(const std::string& path) {
  nn::Checkpoint ckpt = nn::load_checkpoint(path);
  auto meta = [&](const std::string& key) -> const std::string& {
    auto it = ckpt.metadata.find(key);
    BRIGADE_CHECK(it != ckpt.metadata.end(), "--resume ", path, ": not a `brigade train` checkpoint (no '", key,
                  "' in its metadata)");
    return it->second;
  };
  BRIGADE_CHECK(meta("format") == kFormat, "--resume ", path, ": unknown checkpoint format '", meta("format"),
                "' (expected ", kFormat, ")");
  for (const Setting& s : settings_of(options_)) {
    const std::string& saved = meta(s.key());
    if (saved == s.value) continue;
    BRIGADE_CHECK(!s.must_match, "--resume ", path, ": the checkpoint was trained with ", s.flag, " ", saved,
                  " but this run has ", s.flag, " ", s.value, " (model, task and data settings must match)");
    resume_notes_.push_back(std::string(s.flag) + ": " + saved + " in the checkpoint, now " + s.value);
  }
  auto number = [&](const std::string& key, auto value) {
    const std::string& text = meta(key);
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    BRIGADE_CHECK(ec == std::errc() && end == text.data() + text.size(), "--resume ", path, ": bad '", key,
                  "' in its metadata: '", text, "'");
    return value;
  };
  const int64_t step = number("step", int64_t(0));
  BRIGADE_CHECK(step >= 0 && step <= options_.steps, "--resume ", path, ": the checkpoint is at step ", step,
                ", past --steps ", options_.steps);
  const double first_loss = number("first_loss", 0.0);
  model_->load_state_dict(ckpt.model);
  optimizer_->load_state_dict(ckpt.optimizer);
  step_ = step;
  first_loss_ = first_loss;
}

Accuracy Trainer::evaluate(int64_t examples) { return evaluate_sorting(*model_, task_, options_.seed, examples); }

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

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
  out << "run: " << o.steps << " steps of " << o.batch << " sequences, seed " << o.seed << ", " << o.device
      << ", " << num_threads() << " threads\n";
}

}  // namespace

// Fails before training rather than after it when the checkpoint could never be written.
void check_save_path(const std::string& path) {
  if (path.empty()) return;
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  BRIGADE_CHECK(std::filesystem::is_directory(dir), "--save ", path, ": the directory ", dir.string(),
                " does not exist");
}

TrainSummary run_training(const TrainOptions& options, std::ostream& out) {
  check_save_path(options.save);
  if (options.threads > 0) set_num_threads(options.threads);
  const auto run_start = Clock::now();
  Trainer trainer(options);
  print_header(trainer, out);
  if (!options.resume.empty()) {
    out << "resumed from " << options.resume << " at step " << trainer.step() << "\n";
    for (const std::string& note : trainer.resume_notes()) out << "note: " << note << "\n";
  }
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
    if (options.save_every > 0 && step % options.save_every == 0 && step < options.steps) {
      trainer.save(options.save);
      out << "saved " << options.save << " at step " << step << "\n";
    }
  }
  const double train_seconds = seconds_since(train_start);
  const int64_t steps_run = trainer.step() - start_step;
  if (!options.save.empty()) {
    trainer.save(options.save);
    out << "saved " << options.save << " at step " << trainer.step() << "\n";
  }

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

}  // namespace brigade::train
