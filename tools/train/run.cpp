// The whole `brigade train` run around a Trainer: the header, progress lines, periodic saves,
// resuming, the evaluation and the pipeline's timeline report; one rank or a pipeline of them.
#include "trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <ostream>
#include <thread>

#include "checkpoint_dir.h"
#include "tools/cli/matmul_choice.h"
#include "comm/comm.h"
#include "core/error.h"
#include "core/factory.h"
#include "core/format.h"
#include "core/host_memory.h"
#include "core/parallel.h"
#include "core/stream.h"
#include "kernels/ops.h"
#include "pipeline/analysis/simulator.h"
#include "pipeline/trace.h"
#include "device_memory.h"
#include "memory_report.h"
#include "mfu.h"
#include "progress.h"
#include "text_task.h"

namespace brigade::train {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string scientific(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1e", v);
  return buf;
}

// The devices a run's ranks share: one when every rank is a thread on one device (the CPU's cores
// or one GPU's streams); under `brigade launch`, one per process (each its own GPU or CPU).
double devices_of() {
  const int world = comm::read_launch_env().world_size;
  return world > 1 ? double(world) : 1.0;
}

void print_header(Trainer& trainer, std::ostream& out) {
  const TrainOptions& o = trainer.options();
  const Task& task = trainer.task();
  out << task.describe() << "\n";
  out << "model: " << (o.model.empty() ? "GPT" : o.model) << ", " << o.layers << " layers, " << o.heads << " heads, " << o.embd << " wide, "
      << with_commas(nn::GPT::whole_parameter_count(trainer.model().config())) << " parameters (sequence length "
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
    out << "partition: " << pipeline::partition_method_name(trainer.partition_method()) << " (" << trainer.partition_reason() << ")\n";
    out << trainer.partition_table();
  }
  const nn::GPTConfig& config = trainer.model().config();
  out << "run: " << o.steps << " steps of " << o.batch << " sequences, seed " << o.seed << ", "
      << cli::device_choice_name(o.device) << " (" << config.device.str() << "), "
      << (config.compute_dtype == DType::bf16 ? "bf16 compute with f32 master weights" : "f32") << ", "
      << (config.device.is_cuda() && o.matmul != ops::MatmulBackend::automatic ? "matmul " + cli::matmul_choice_name(o.matmul) + ", " : "")
      << num_threads()
      << " threads\n";
}

// "validation loss 5.1234 at step 200 (8.3011 at step 0)": every rank calls it (the leader gathers
// the model in a pipeline); the leader prints.
double report_validation(Trainer& trainer, std::ostream& out, double first) {
  const double loss = trainer.validation_loss(trainer.options().eval_examples);
  if (!trainer.is_leader()) return loss;
  char line[160];
  std::snprintf(line, sizeof line, "validation loss %.4f at step %lld", loss, (long long)trainer.step());
  out << line;
  if (!std::isnan(first) && trainer.step() > 0) {
    std::snprintf(line, sizeof line, " (%+.1f%% since the first measurement)", 100.0 * (loss - first) / first);
    out << line;
  }
  out << "\n";
  out.flush();
  return loss;
}

// --matmul tuned: which GEMM won how many of the problems this process measured (the ranks it runs as
// threads; a multi-process launch reports each process's own), and
// how many candidates were refused (stderr names them and why). Nothing on the
// CPU, or where every matmul was f32 (nothing to choose).
void report_tuned_gemms(const TrainOptions& o, std::ostream& out) {
  if (o.matmul != ops::MatmulBackend::tuned) return;
  const std::vector<ops::MatmulTuning> tunings = ops::matmul_tunings();
  if (tunings.empty()) return;
  std::map<std::string, int> wins;
  size_t refused = 0;
  for (const ops::MatmulTuning& t : tunings) {
    ++wins[ops::matmul_backend_name(t.chosen)];
    refused += t.excluded.size();
  }
  out << "matmul tuned: " << tunings.size() << " problems measured, won by";
  for (const auto& [name, count] : wins) out << " " << name << " " << count;
  if (refused > 0) out << "; " << refused << " candidate(s) refused: wrong output or a failure (stderr says which)";
  out << "\n";
}

}  // namespace

// Fails before training rather than after it when the checkpoint could never be written.
void check_save_path(const std::string& path) {
  if (path.empty()) return;
  if (is_checkpoint_dir(path)) return make_checkpoint_dir(path);
  // Checkpoints are directories now: an older build's single file at PATH would fail the first save,
  // after training. It still resumes (--resume PATH); the new checkpoint needs a path of its own.
  BRIGADE_CHECK(!std::filesystem::is_regular_file(path), "--save ", path, ": a file is in the way (a single-file "
                "checkpoint of an older brigade? it still resumes with --resume ", path, "; save to another path)");
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  BRIGADE_CHECK(std::filesystem::is_directory(dir), "--save ", path, ": the directory ", dir.string(),
                " does not exist");
}

void report_timeline(Trainer& trainer, const TrainOptions& options, std::ostream& out,
                     const std::vector<double>& measured_peaks);

namespace {

// Where the run continues from, and why there.
void print_resume(const Trainer& trainer, std::ostream& out) {
  const TrainOptions& o = trainer.options();
  const bool save_dir = is_checkpoint_dir(o.save);
  if (save_dir && !o.resume.empty()) out << "--resume given: the checkpoints in " << o.save << " are not used\n";
  for (const std::string& warning : trainer.resume_warnings()) out << "warning: " << warning << "\n";
  if (!trainer.resumed_from().empty()) {
    out << "resumed from " << trainer.resumed_from() << " at step " << trainer.step() << "\n";
    if (!o.init_from.empty()) out << "note: --init-from " << o.init_from << " is not used: the run resumes\n";
    for (const std::string& note : trainer.resume_notes()) out << "note: " << note << "\n";
  } else if (save_dir) {
    out << "no checkpoint to resume in " << o.save << "; starting at step 0\n";
  }
}

// Every rank calls it (each writes its shard); the leader, in a --save directory, deletes the
// checkpoints beyond --keep once the new one is complete. `save_dir` is decided once, before any
// save: a rank asking again could see the directory another rank's first `--save PATH` just created.
void save_checkpoint(Trainer& trainer, std::ostream& out, bool save_dir) {
  const TrainOptions& o = trainer.options();
  const std::string path = save_dir ? checkpoint_path(o.save, trainer.step()) : o.save;
  trainer.save(path);
  if (save_dir && trainer.is_leader()) prune_checkpoints(o.save, trainer.step(), o.keep);
  out << "saved " << path << " at step " << trainer.step() << "\n";
  out.flush();  // a launcher's log (or a test) watching for checkpoints sees it now, not steps later
}

// Every pipeline rank's measured peak, on every rank: each fills its own entry of a sum. Host memory
// only: on a GPU the ranks' host accounts miss what the step allocates (an empty list then).
std::vector<double> gather_peaks(Trainer& trainer, const pipeline::PipelineGroups* groups, double mine) {
  if (groups == nullptr || !trainer.model().config().device.is_cpu()) return {};
  comm::Communicator& comm = *groups->pipeline;
  std::vector<double> peaks(size_t(comm.size()), 0.0);
  peaks[size_t(comm.rank())] = mine;
  Tensor t = from_vector(peaks, {int64_t(peaks.size())}, DType::f64);
  comm.all_reduce(t);
  return t.to_vector();
}

// The loop every rank runs; only the leader's `out` is a real stream.
TrainSummary train_rank(const TrainOptions& options, const pipeline::PipelineGroups* groups, std::ostream& out) {
  const auto run_start = Clock::now();
  // The host memory this rank holds, apart from the other ranks that are threads of this process:
  // the pipeline's memory report compares its peak with the prediction.
  const auto memory = std::make_shared<HostMemoryAccount>();
  const HostMemoryScope charged_to_this_rank(memory);
  const bool save_dir = is_checkpoint_dir(options.save);  // before any rank can have saved
  Trainer trainer(options, groups);
  const MemoryContextScope out_of_memory_says = register_memory_context(trainer, groups);
  print_header(trainer, out);
  print_resume(trainer, out);
  out.flush();

  // One batch's loss is noisy; progress lines show the mean since the previous line, and the final
  // comparison uses the mean of the last few steps.
  const int64_t tokens_per_step = options.batch * trainer.task().sequence_length();
  const int64_t start_step = trainer.step();
  // Language modelling: MFU on each progress line, and the validation loss every eval_every steps.
  const auto* lm = dynamic_cast<const TextTask*>(&trainer.task());
  const bool validate = lm != nullptr && lm->validation() != nullptr;
  const int64_t eval_every = options.eval_every > 0 ? options.eval_every : 5 * options.log_every;
  Peak peak;
  double flops_per_token = 0;
  const double devices = devices_of();
  if (lm && trainer.is_leader()) {
    // The leader alone measures (on the CPU, a GEMM): the other ranks wait for its first validation
    // gather meanwhile, so the measurement has the cores to itself.
    const nn::GPTConfig& config = trainer.model().config();
    peak = device_peak(config.device, config.compute_dtype.value_or(config.dtype));
    flops_per_token = training_flops_per_token(trainer.model());
    char line[200];
    std::snprintf(line, sizeof line, "mfu: %.3g GFLOP per token (6N + 12LCT), peak %.4g GFLOP/s: ", flops_per_token / 1e9,
                  peak.flops_per_second / 1e9);
    out << line << peak.source << "\n";
  }
  if (lm && !validate) out << "no validation shards in " << options.data << ": no validation loss\n";
  double first_validation = std::numeric_limits<double>::quiet_NaN();
  if (validate) first_validation = report_validation(trainer, out, first_validation);
  const size_t tail_steps = 10;
  std::deque<double> tail;
  double window_loss = 0;
  int64_t window_steps = 0;
  auto window_start = Clock::now();
  const auto train_start = Clock::now();
  TrainSummary summary;
  if (validate) summary.validation.emplace_back(trainer.step(), first_validation);

  double last_step_peak = 0;
  while (trainer.step() < options.steps) {
    const bool last = trainer.step() + 1 == options.steps;
    if (last) {
      trainer.set_trace(true);  // the last step's timeline, and its memory
      memory->reset_peak();
    }
    const double loss = trainer.train_step();
    if (last) last_step_peak = double(memory->peak());
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
      // Every rank of a pipeline (or replica) shares the device's peak, so the run's MFU divides by
      // all of them: on one GPU the ranks are streams of that GPU, and they are counted once.
      if (peak.flops_per_second > 0)
        report.mfu = report.tokens_per_second * flops_per_token / (peak.flops_per_second * devices);
      out << format_step(report) << "\n";
      out.flush();
      window_loss = 0;
      window_steps = 0;
      window_start = Clock::now();
    }
    if (validate && (step % eval_every == 0 || step == options.steps)) {
      summary.validation.emplace_back(step, report_validation(trainer, out, first_validation));
    }
    if (options.save_every > 0 && step % options.save_every == 0 && step < options.steps) save_checkpoint(trainer, out, save_dir);
  }
  const double train_seconds = seconds_since(train_start);
  const int64_t steps_run = trainer.step() - start_step;
  if (trainer.pipelined() && steps_run > 0)
    report_timeline(trainer, options, out, gather_peaks(trainer, groups, last_step_peak));
  if (!options.save.empty()) save_checkpoint(trainer, out, save_dir);

  summary.steps = trainer.step();
  summary.first_loss = trainer.first_loss();
  summary.last_loss = std::numeric_limits<double>::quiet_NaN();
  if (!tail.empty()) summary.last_loss = std::accumulate(tail.begin(), tail.end(), 0.0) / double(tail.size());
  if (!lm) summary.accuracy = trainer.evaluate(options.eval_examples);

  char line[200];
  if (steps_run == 0) {
    out << "no steps to run: the checkpoint is already at step " << trainer.step() << " of " << options.steps << "\n";
  } else {
    std::snprintf(line, sizeof line, "loss: %.4f at step 1 -> %.4f over the last %zu steps (%+.1f%%)",
                  summary.first_loss, summary.last_loss, tail.size(),
                  100.0 * (summary.last_loss - summary.first_loss) / summary.first_loss);
    out << line << "\n";
  }
  if (!lm) {
    std::snprintf(line, sizeof line,
                  "held-out accuracy (%lld unseen sequences, greedy decoding): %.1f%% sorted exactly, %.1f%% of "
                  "digits right",
                  (long long)summary.accuracy.examples, 100.0 * summary.accuracy.sequences,
                  100.0 * summary.accuracy.tokens);
    out << line << "\n";
  }
  if (lm && lm->tokenizer()) {
    const std::string text = trainer.sample(64, options.seed);
    if (trainer.is_leader()) out << "sample (64 tokens, temperature 0.8, top-k 40):\n" << text << "\n";
  }
  report_tuned_gemms(options, out);
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

void report_timeline(Trainer& trainer, const TrainOptions& options, std::ostream& out,
                     const std::vector<double>& measured_peaks) {
  const pipeline::Trace& trace = trainer.last_trace();
  if (!trainer.is_leader() || trace.events.empty()) return;
  const pipeline::Schedule& schedule = trainer.schedule();
  // Each stage's own measured cost of each compute kind: a simulation with this machine's costs. One
  // mean for all stages would predict a balanced pipeline where the embedding's and the head's
  // stages are in fact nearly idle.
  const std::vector<pipeline::Trace> traces{trace};
  const pipeline::Costs measured_costs = pipeline::simulator_costs(
      pipeline::mean_action_costs(traces), pipeline::stage_action_costs(traces, schedule.layout));
  const pipeline::SimulationResult unit = pipeline::simulate(schedule);
  const pipeline::SimulationResult predicted = pipeline::simulate(schedule, measured_costs);
  const pipeline::SimulationResult measured = pipeline::to_simulation(trace, schedule, &predicted);
  char line[300];
  std::snprintf(line, sizeof line,
                "bubble (last step): measured %.3f; simulator %.3f with unit costs, %.3f with each stage's measured "
                "costs",
                trace.measured_bubble(), unit.bubble_fraction, predicted.bubble_fraction);
  out << line << "\n";
  out << "measured costs per stage (ms):";
  for (size_t s = 0; s < measured_costs.stages.size(); ++s) {
    const pipeline::StageCost& c = measured_costs.stages[s];
    std::snprintf(line, sizeof line, " %zu: F %.2f B %.2f%s", s, 1e3 * c.forward, 1e3 * (c.backward + c.weight),
                  s + 1 < measured_costs.stages.size() ? ";" : "");
    out << line;
  }
  out << "\n";
  if (!measured_peaks.empty()) report_memory(trainer, trace, predicted, measured_peaks, out);
  if (enabled(options.trace)) {
    pipeline::save_chrome_trace(options.trace, trace, schedule);
    out << "trace: " << options.trace << " (open in ui.perfetto.dev)\n";
  }
  if (enabled(options.svg)) {
    pipeline::save_timeline_svg_compare(options.svg, schedule, predicted, measured,
                                        "simulated with each stage's measured costs", "measured (last step)", "s");
    out << "timeline: " << options.svg << " (simulated above, measured below)\n";
  }
}

TrainSummary run_training(const TrainOptions& options_in, std::ostream& out) {
  TrainOptions options = options_in;
  check_save_path(options.save);
  if (options.threads > 0) set_num_threads(options.threads);
  // --matmul for every matmul of the run: process-wide, set before any rank thread starts, and the
  // previous backend restored when the run ends. check_combination has refused a backend the GPU
  // cannot run; the CPU has one GEMM and ignores the choice.
  const cli::ScopedMatmulBackend matmul(options.matmul);
  // The one check that the device can be used here (the Trainer takes --device as it is).
  const Device device = cli::usable_device(options.device);
  if (options.stages == 0) {
    apply_memory_limit(options, device);
    return train_rank(options, nullptr, out);
  }

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
    connect.device = device.is_cuda() ? comm::local_device(env) : Device::cpu();
    apply_memory_limit(options, connect.device);
    auto world = comm::connect(env, connect);
    auto groups = pipeline::PipelineGroups::split(*world, P);
    const bool leader = world->rank() == 0;
    return train_rank(options, groups.get(), leader ? out : null_stream());
  }

  // One process: every rank a thread, on the GPU each with its own stream.
  const int world_size = int(P * options.replicas);
  apply_memory_limit(options, device);
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
