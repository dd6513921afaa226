#include "run_report.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <map>
#include <sstream>

#include "checkpoint_dir.h"
#include "comm/comm.h"
#include "core/format.h"
#include "core/parallel.h"
#include "kernels/ops.h"
#include "memory_report.h"
#include "pipeline/analysis/simulator.h"
#include "pipeline/trace.h"
#include "progress.h"
#include "text_task.h"
#include "tools/cli/matmul_choice.h"

namespace brigade::train {

namespace {

// "3.0e-03", as printf's %.1e.
std::string scientific(double v) {
  std::ostringstream os;
  os << std::scientific << std::setprecision(1) << v;
  return os.str();
}

bool enabled(const std::string& path) { return !path.empty() && path != "none"; }

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

void print_header(Trainer& trainer, std::ostream& out) {
  const TrainOptions& o = trainer.options();
  const Task& task = trainer.task();
  out << task.describe() << "\n";
  const nn::GPTConfig& c = trainer.model().config();
  const std::string family = c.arch == nn::Arch::llama
                                 ? " (" + std::to_string(c.n_kv_head == 0 ? c.n_head : c.n_kv_head) + " kv heads, MLP " +
                                       std::to_string(nn::mlp_hidden_of(c)) + (c.tie_embeddings ? ", tied)" : ", untied)")
                                 : "";
  out << "model: " << (!o.model.empty() ? o.model : c.arch == nn::Arch::llama ? std::string("llama") : std::string("GPT")) << family << ", " << o.layers
      << " layers, " << o.heads << " heads, " << o.embd << " wide, "
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
      << (o.device ? config.device.str() : "auto (" + config.device.str() + ")") << ", "
      << (config.compute_dtype == DType::bf16 ? "bf16 compute with f32 master weights" : "f32") << ", "
      << (config.device.is_cuda() && o.matmul != ops::MatmulBackend::automatic ? "matmul " + cli::matmul_choice_name(o.matmul) + ", " : "") << num_threads()
      << " threads\n";
}

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

void report_timeline(Trainer& trainer, std::ostream& out, const std::vector<double>& measured_peaks) {
  const TrainOptions& options = trainer.options();
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
  out << "bubble (last step): measured " << format_fixed(trace.measured_bubble(), 3) << "; simulator "
      << format_fixed(unit.bubble_fraction, 3) << " with unit costs, " << format_fixed(predicted.bubble_fraction, 3)
      << " with each stage's measured costs\n";
  out << "measured costs per stage (ms):";
  for (size_t s = 0; s < measured_costs.stages.size(); ++s) {
    const pipeline::StageCost& c = measured_costs.stages[s];
    out << " " << s << ": F " << format_fixed(1e3 * c.forward, 2) << " B " << format_fixed(1e3 * (c.backward + c.weight), 2)
        << (s + 1 < measured_costs.stages.size() ? ";" : "");
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

void print_summary(Trainer& trainer, const Progress& progress, const TrainSummary& summary, Clock::time_point run_start,
                   double train_seconds, std::ostream& out) {
  const TrainOptions& options = trainer.options();
  const auto* lm = dynamic_cast<const TextTask*>(&trainer.task());
  const int64_t steps_run = trainer.step() - progress.start_step;
  if (steps_run == 0) {
    out << "no steps to run: the checkpoint is already at step " << trainer.step() << " of " << options.steps << "\n";
  } else {
    out << "loss: " << format_fixed(summary.first_loss, 4) << " at step 1 -> " << format_fixed(summary.last_loss, 4)
        << " over the last " << progress.tail.size() << " steps ("
        << signed_fixed(100.0 * (summary.last_loss - summary.first_loss) / summary.first_loss, 1) << "%)\n";
  }
  if (!lm) {
    out << "held-out accuracy (" << summary.accuracy.examples << " unseen sequences, greedy decoding): "
        << format_fixed(100.0 * summary.accuracy.sequences, 1) << "% sorted exactly, "
        << format_fixed(100.0 * summary.accuracy.tokens, 1) << "% of digits right\n";
  }
  if (lm && lm->tokenizer()) {
    const std::string text = trainer.sample(64, options.seed);  // every rank: a pipeline samples together
    if (trainer.is_leader()) out << "sample (64 tokens, temperature 0.8, top-k 40):\n" << text << "\n";
  }
  report_tuned_gemms(options, out);
  out << "time: " << format_duration(seconds_since(run_start)) << " in all";
  if (steps_run > 0)
    out << ", " << steps_run << " steps in " << format_duration(train_seconds) << " ("
        << format_fixed(double(steps_run * progress.tokens_per_step) / train_seconds, 0) << " tok/s)";
  out << "\n";
}

}  // namespace brigade::train
