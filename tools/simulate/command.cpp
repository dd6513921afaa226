#include "command.h"

#include <exception>
#include <ostream>
#include <sstream>

#include "core/format.h"
#include "options.h"
#include "tools/cli/command.h"
#include "pipeline/analysis/grid.h"
#include "pipeline/schedule.h"
#include "pipeline/schedule_csv.h"
#include "pipeline/analysis/simulator.h"
#include "pipeline/analysis/timeline.h"

namespace brigade::simulate_cli {

namespace {

using namespace brigade::pipeline;

std::string fixed4(double v) { return format_fixed(v, 4); }

std::string list(const std::vector<int>& values) {
  std::string out;
  for (int v : values) {
    if (!out.empty()) out += ' ';
    out += std::to_string(v);
  }
  return out;
}

// What the papers predict, for comparison with what the simulator measured. Only for the cases the
// formulas cover: every rank doing the same work and messages taking no time.
std::string textbook(const SimulateOptions& o, int P, int M, int V) {
  if (o.cost_comm != 0 || !o.stage_f.empty() || !o.stage_b.empty() || !o.stage_w.empty()) return "";
  if (o.schedule == ScheduleKind::naive) return "(P-1)/P = " + fixed4((P - 1.0) / P);
  if (o.schedule == ScheduleKind::gpipe || o.schedule == ScheduleKind::one_f_one_b) {
    return "(P-1)/(M+P-1) = " + fixed4((P - 1.0) / (M + P - 1)) + ", bubble/compute (P-1)/M = " + fixed4((P - 1.0) / M);
  }
  if (o.schedule == ScheduleKind::interleaved) {
    return "(P-1)/(V*M+P-1) = " + fixed4((P - 1.0) / (V * M + P - 1)) +
           ", bubble/compute (P-1)/(V*M) = " + fixed4((P - 1.0) / (V * M));
  }
  if (o.schedule == ScheduleKind::zb_h1 && o.cost_f == o.cost_b && o.cost_b == o.cost_w && M >= P) {
    return "(P-1)/(3M+P-1) = " + fixed4((P - 1.0) / (3 * M + P - 1)) + " with F = I = W and M >= P";
  }
  if (o.schedule == ScheduleKind::zb_v && o.cost_f == o.cost_b && o.cost_b == o.cost_w && M >= 2 * P) {
    return "(P-1)/(6M+P-1) = " + fixed4((P - 1.0) / (6 * M + P - 1)) + " with F = I = W and M >= 2P";
  }
  return "";
}

// The per-stage costs of the command line: empty when every cost is one number; else each list must
// have one value per stage, and a kind given as one number costs that on every stage.
std::vector<StageCost> stage_costs(const SimulateOptions& o, int stages) {
  if (o.stage_f.empty() && o.stage_b.empty() && o.stage_w.empty()) return {};
  const std::pair<const char*, const std::vector<double>*> lists[] = {
      {"--cost-f", &o.stage_f}, {"--cost-b", &o.stage_b}, {"--cost-w", &o.stage_w}};
  for (const auto& [flag, list] : lists) {
    if (!list->empty() && int(list->size()) != stages) {
      throw UsageError(std::string(flag) + ": " + std::to_string(list->size()) + " per-stage costs, but the schedule has " +
                       std::to_string(stages) + " stages (P*V): give one number, or one per stage");
    }
  }
  std::vector<StageCost> out(static_cast<size_t>(stages), StageCost{});
  for (size_t s = 0; s < out.size(); ++s) {
    out[s].forward = o.stage_f.empty() ? o.cost_f : o.stage_f[s];
    out[s].backward = o.stage_b.empty() ? o.cost_b : o.stage_b[s];
    out[s].weight = o.stage_w.empty() ? o.cost_w : o.stage_w[s];
  }
  return out;
}

std::string joined(const std::vector<double>& values) {
  std::ostringstream os;
  for (size_t i = 0; i < values.size(); ++i) os << (i ? "," : "") << values[i];
  return os.str();
}

int run(const SimulateOptions& o, std::ostream& out, std::ostream& err) {
  Schedule schedule;
  if (!o.schedule_file.empty()) {
    try {
      schedule = schedule_from_file(read_schedule_csv(o.schedule_file));
    } catch (const Error& e) {  // a file that does not hold a runnable schedule
      err << "brigade simulate: " << e.what() << "\n";
      return 1;
    }
  } else {
    try {
      schedule = make_schedule(o.schedule, o.stages, o.microbatches, o.chunks_or_default());
    } catch (const Error& e) {  // a configuration the schedule cannot run: a command-line problem
      err << "brigade simulate: " << e.what() << "\n";
      return 2;
    }
  }
  const int P = schedule.ranks(), M = schedule.microbatches, V = schedule.chunks();
  Costs costs;
  costs.forward = o.cost_f;
  costs.backward = o.cost_b;
  costs.weight = o.cost_w;
  costs.communication = o.cost_comm;
  try {
    costs.stages = stage_costs(o, schedule.stages());
  } catch (const UsageError& e) {
    err << "brigade simulate: " << e.what() << "\n";
    return 2;
  }
  const SimulationResult r = simulate(schedule, costs, o.activation_bytes);

  out << "schedule: " << (o.schedule_file.empty() ? std::string(schedule_name(o.schedule)) : "file " + o.schedule_file) << ", " << P << " rank" << (P == 1 ? "" : "s") << ", " << M << " micro-batch"
      << (M == 1 ? "" : "es") << ", " << V << " chunk" << (V == 1 ? "" : "s") << " per rank (" << schedule.stages()
      << " stage" << (schedule.stages() == 1 ? "" : "s") << ")\n";
  if (costs.stages.empty()) {
    out << "costs: F=" << o.cost_f;
    if (schedule.split_backward()) {
      out << " I=" << o.cost_b << " W=" << o.cost_w;
    } else {
      out << " B=" << costs.full_backward() << " (input " << o.cost_b << " + weight " << o.cost_w << ")";
    }
  } else {
    std::vector<double> f, b, w;
    for (const StageCost& c : costs.stages) {
      f.push_back(c.forward);
      b.push_back(c.backward);
      w.push_back(c.weight);
    }
    out << "costs per stage: F=" << joined(f) << " I=" << joined(b) << " W=" << joined(w);
  }
  out << ", communication " << o.cost_comm << "\n";
  double busy = 0;
  for (double b : r.busy) busy += b;
  out << "makespan: " << r.makespan << " time units, busy " << busy / P << " per rank\n";
  out << "bubble fraction: " << fixed4(r.bubble_fraction) << "\n";
  out << "bubble/compute: " << fixed4(r.bubble_ratio) << "\n";
  if (const std::string t = o.schedule_file.empty() ? textbook(o, P, M, V) : ""; !t.empty())
    out << "textbook: " << t << "\n";
  out << "peak stashed activations per stage: " << list(r.peak_activations) << "\n";
  if (V > 1) out << "peak stashed activations per rank: " << list(r.peak_activations_per_rank) << "\n";
  out << "messages: " << r.messages() << " (" << r.activation_messages << " activations, " << r.gradient_messages
      << " gradients)";
  if (o.activation_bytes > 0) out << ", " << format_bytes(double(r.bytes));
  out << "\n\n" << timeline_text(schedule, r, o.width);
  if (o.grid) out << "\n" << action_grid(schedule);
  if (!o.svg.empty()) {
    save_timeline_svg(o.svg, schedule, r);
    out << "timeline written to " << o.svg << "\n";
  }
  if (!o.write_schedule.empty()) {
    write_schedule_csv(o.write_schedule, schedule);
    out << "schedule written to " << o.write_schedule << " (PyTorch's CSV format)\n";
  }
  return 0;
}

}  // namespace

int simulate_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  return cli::run_command(
      "brigade simulate", out, err, [&] { return parse_simulate_args(args); }, [] { return simulate_usage(); },
      [&](const SimulateOptions& options) { return run(options, out, err); });
}

}  // namespace brigade::simulate_cli
