#include "bench_pipeline/benchmark.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <ostream>
#include <thread>

#include "bench/environment.h"
#include "bench_pipeline/steps.h"
#include "tools/cli/gpt_flags.h"
#include "core/error.h"
#include "core/parallel.h"
#include "pipeline/analysis/simulator.h"
#include "pipeline/schedule_csv.h"
#include "pipeline/trace.h"

namespace brigade::bench_pipeline {

namespace {

using pipeline::Schedule;
using pipeline::ScheduleKind;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double median(const std::vector<double>& samples) { return samples.empty() ? kNaN : bench::quantile(samples, 0.5); }

// "model name : AMD EPYC ..." from /proc/cpuinfo; "cpu" when there is none (not Linux).
std::string cpu_model_name() {
  std::ifstream info("/proc/cpuinfo");
  std::string line;
  while (std::getline(info, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon != std::string::npos && colon + 2 <= line.size()) return line.substr(colon + 2);
  }
  return "cpu";
}

std::string ms(double seconds) {
  return bench::format_number(seconds * 1e3, 3) + " ms";
}

// Bubbles, costs, predictions and communication shares, from the timed steps' traces.
void analyse(ScheduleResult& r, const Schedule& schedule, const PipelinedSteps& steps) {
  const size_t P = size_t(schedule.ranks());
  std::vector<double> makespans, exposed, hidden;
  std::vector<std::vector<double>> compute(P), exchange(P), hidden_per_rank(P);
  for (const pipeline::Trace& trace : steps.traces) {
    const double makespan = trace.makespan();
    r.bubbles.push_back(trace.measured_bubble());
    makespans.push_back(makespan);
    const std::vector<RankTime> times = rank_times(trace);
    double exchange_total = 0, hidden_total = 0, exposed_sum = 0;
    for (size_t q = 0; q < P; ++q) {
      const RankTime& t = times[q];
      compute[q].push_back(t.compute / makespan);
      exchange[q].push_back(t.exchange / makespan);
      if (t.exchange > 0) hidden_per_rank[q].push_back(t.hidden / t.exchange);
      exchange_total += t.exchange;
      hidden_total += t.hidden;
      exposed_sum += t.exchange / makespan;
    }
    exposed.push_back(exposed_sum / double(P));
    if (exchange_total > 0) hidden.push_back(hidden_total / exchange_total);
  }
  r.bubble = median(r.bubbles);
  r.makespan = median(makespans);
  r.exposed_comm = median(exposed);
  r.hidden_comm = median(hidden);
  for (size_t q = 0; q < P; ++q) {
    r.ranks_detail.push_back({median(compute[q]), median(exchange[q]), median(hidden_per_rank[q]),
                              steps.peak_stashed[q]});
  }

  r.costs = mean_action_costs(steps.traces);
  const pipeline::SimulationResult predicted = pipeline::simulate(schedule, simulator_costs(r.costs));
  r.predicted_bubble = predicted.bubble_fraction;
  r.predicted_makespan = predicted.makespan;
  const pipeline::SimulationResult unit = pipeline::simulate(schedule);
  r.unit_bubble = unit.bubble_fraction;
  r.unit_makespan = unit.makespan;
  r.unit_busy = unit.busy;
}

// The step whose bubble is closest to the median: the one the trace files show.
size_t typical_step(const ScheduleResult& r) {
  size_t best = 0;
  for (size_t i = 1; i < r.bubbles.size(); ++i)
    if (std::abs(r.bubbles[i] - r.bubble) < std::abs(r.bubbles[best] - r.bubble)) best = i;
  return best;
}

void write_trace_files(ScheduleResult& r, const Schedule& schedule, const PipelinedSteps& steps,
                       const std::string& dir) {
  const pipeline::Trace& trace = steps.traces.at(typical_step(r));
  const std::string base = (std::filesystem::path(dir) / r.name).string();

  pipeline::save_chrome_trace(base + ".trace.json", trace, schedule);
  r.files.push_back(base + ".trace.json");

  const pipeline::Costs costs = simulator_costs(r.costs);
  const pipeline::SimulationResult simulated = pipeline::simulate(schedule, costs);
  const pipeline::SimulationResult measured = pipeline::to_simulation(trace, schedule, &simulated);
  std::string costs_text = "F " + ms(costs.forward);
  if (schedule.split_backward()) costs_text += ", I " + ms(costs.backward) + ", W " + ms(costs.weight);
  else costs_text += ", B " + ms(costs.full_backward());
  pipeline::save_timeline_svg_compare(base + ".svg", schedule, simulated, measured,
                                      "simulated with the measured mean costs (" + costs_text + ")",
                                      "measured (" + ms(trace.makespan()) + ")", "s");
  r.files.push_back(base + ".svg");
}

ScheduleResult time_schedule(const std::string& name, const Schedule& schedule, const BenchOptions& o,
                             const Workload& work, const BenchResult& so_far, std::ostream& progress);

ScheduleResult run_schedule(ScheduleKind kind, const BenchOptions& o, const Workload& work,
                            const BenchResult& so_far, std::ostream& progress) {
  const std::string name = pipeline::schedule_name(kind);
  const int chunks = kind == ScheduleKind::interleaved ? o.chunks : pipeline::default_chunks(kind);  // the V's: 2
  std::string skipped;
  if (kind == ScheduleKind::interleaved && o.microbatches % o.stages != 0) {
    // Megatron's rule (pipeline/schedule.h): micro-batches go round the ranks in groups of P.
    skipped = "interleaved needs M to be a multiple of P (M=" + std::to_string(o.microbatches) +
              ", P=" + std::to_string(o.stages) + ")";
  }
  if (kind == ScheduleKind::dualpipev && o.microbatches < 2 * o.stages) {
    skipped = "dualpipev needs at least as many micro-batches as stages, M >= 2P (M=" +
              std::to_string(o.microbatches) + ", P=" + std::to_string(o.stages) + ")";
  }
  if (!skipped.empty()) {
    ScheduleResult r;
    r.name = name;
    r.ranks = o.stages;
    r.microbatches = o.microbatches;
    r.chunks = chunks;
    r.skipped = skipped;
    return r;
  }
  return time_schedule(name, pipeline::make_schedule(kind, o.stages, o.microbatches, chunks), o, work, so_far, progress);
}

// A schedule file (PyTorch's CSV format, pipeline/schedule_csv.h): checked when read, and its P and
// M must be the run's, which the workload was cut for.
Schedule read_schedule_file(const BenchOptions& o) {
  const Schedule schedule = pipeline::schedule_from_file(pipeline::read_schedule_csv(o.schedule_file));
  BRIGADE_CHECK(schedule.ranks() == o.stages && schedule.microbatches == o.microbatches, "--schedule-file ",
                o.schedule_file, ": the file's schedule has P=", schedule.ranks(), ", M=", schedule.microbatches,
                ", but this run has --stages ", o.stages, " and --microbatches ", o.microbatches);
  return schedule;
}

ScheduleResult time_schedule(const std::string& name, const Schedule& schedule, const BenchOptions& o,
                             const Workload& work, const BenchResult& so_far, std::ostream& progress) {
  ScheduleResult r;
  r.name = name;
  r.ranks = schedule.ranks();
  r.microbatches = schedule.microbatches;
  r.chunks = schedule.chunks();
  progress << "bench pipeline: " << name << " (" << o.warmup << " warm-up + " << o.steps << " steps)\n" << std::flush;
  Ranks ranks;
  ranks.nccl = o.transport == "nccl";
  const PipelinedSteps steps = run_pipelined(schedule, work, o.warmup, o.steps, ranks);

  r.step_seconds = steps.seconds;
  r.step = bench::summarize(steps.seconds);
  r.tokens_per_second = double(work.tokens_per_step) / r.step.median;
  r.speedup = so_far.unpipelined_step.median / r.step.median;
  r.loss = steps.loss;
  analyse(r, schedule, steps);
  if (!o.trace_dir.empty()) write_trace_files(r, schedule, steps, o.trace_dir);
  r.dp_saved = kNaN;
  if (o.replicas > 1) {
    // Two whole runs, each with its own warm-up and fresh communicators; the same data and model.
    ranks.replicas = o.replicas;
    progress << "bench pipeline: " << name << " with " << o.replicas << " replicas, reductions overlapped, then at the end\n"
             << std::flush;
    ranks.overlap = true;
    const PipelinedSteps overlapped = run_pipelined(schedule, work, o.warmup, o.steps, ranks);
    ranks.overlap = false;
    const PipelinedSteps at_end = run_pipelined(schedule, work, o.warmup, o.steps, ranks);
    r.dp_overlapped = bench::summarize(overlapped.seconds);
    r.dp_at_end = bench::summarize(at_end.seconds);
    r.dp_saved = 1 - r.dp_overlapped.median / r.dp_at_end.median;
    r.dp_reductions = overlapped.reductions;
    r.dp_started_early = overlapped.reductions_during_backward;
  }
  return r;
}

}  // namespace

BenchResult run_benchmark(const BenchOptions& o, std::ostream& progress) {
  // Where the files go is checked before a minute of measuring, not after.
  if (!o.trace_dir.empty()) {
    std::error_code error;
    std::filesystem::create_directories(o.trace_dir, error);
    BRIGADE_CHECK(!error, "--trace-dir: cannot create the directory '", o.trace_dir, "': ", error.message());
  }
  if (!o.json.empty()) {
    const std::filesystem::path parent = std::filesystem::path(o.json).parent_path();
    BRIGADE_CHECK(parent.empty() || std::filesystem::is_directory(parent), "--json ", o.json, ": the directory '",
                  parent.string(), "' does not exist");
  }
  // So is the schedule file, if any.
  const Schedule from_file = o.schedule_file.empty() ? Schedule{} : read_schedule_file(o);
  BenchResult result;
  result.options = o;
  const Device device = *o.device;  // resolved by BenchOptions::resolve
  result.env = bench::describe_environment(device);
  result.device_name = device.is_cuda() ? result.env.gpu_name : cpu_model_name();
  result.cpu_threads = int(std::thread::hardware_concurrency());
  result.kernel_threads = num_threads();

  const nn::GPTConfig config = cli::gpt_config(
      {.layers = o.layers, .heads = o.heads, .embd = o.embd, .vocab = o.vocab, .context = o.seq}, device,
      *o.precision, 1);
  const Workload work = make_workload(config, o.batch, o.seq, o.microbatches);
  result.tokens_per_step = work.tokens_per_step;

  progress << "bench pipeline: unpipelined (" << o.warmup << " warm-up + " << o.steps << " steps)\n" << std::flush;
  const UnpipelinedSteps base = run_unpipelined(work, o.warmup, o.steps);
  result.parameters = base.parameters;
  result.unpipelined_seconds = base.seconds;
  result.unpipelined_step = bench::summarize(base.seconds);
  result.unpipelined_tokens_per_second = double(work.tokens_per_step) / result.unpipelined_step.median;
  result.unpipelined_loss = base.loss;

  for (ScheduleKind kind : o.schedules) result.schedules.push_back(run_schedule(kind, o, work, result, progress));
  if (!o.schedule_file.empty()) {
    const std::string name = std::filesystem::path(o.schedule_file).filename().string();  // the row's name
    result.schedules.push_back(time_schedule(name, from_file, o, work, result, progress));
  }
  return result;
}

}  // namespace brigade::bench_pipeline
