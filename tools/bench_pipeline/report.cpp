#include "bench_pipeline/report.h"

#include <cmath>
#include <cstdio>
#include <iomanip>
#include <limits>
#include <sstream>
#include <type_traits>

#include "core/format.h"
#include "core/json.h"

namespace brigade::bench_pipeline {

namespace {

using bench::Column;
using bench::format_number;
using bench::format_table;

// What the columns mean: printed under the tables and kept in the JSON, so a number never travels
// without its definition.
const std::pair<const char*, const char*> kDefinitions[] = {
    {"step", "wall time of one forward + backward of the whole batch, the slowest rank, median over the steps"},
    {"speed-up", "the unpipelined step time divided by this one (same model, same batch)"},
    {"bubble", "measured: 1 - (sum of the ranks' F/B/I/W time) / (P x the step's traced makespan), median"},
    {"predicted", "pipeline::simulate of the same schedule with the measured mean F/B/I/W durations, free messages"},
    {"unit-cost", "pipeline::simulate with F = I = W = 1 (B = 2): the textbook bubble"},
    {"exposed comm", "time a rank spent blocked inside exchanges (sends and receives), share of the step, mean over ranks"},
    {"hidden", "of that exchange time, the share during which another rank was computing; the rest stalled the whole "
               "pipeline"},
};

// A measurement that did not happen (NaN) shows as "-".
std::string fixed(double v, int decimals) { return std::isfinite(v) ? format_fixed(v, decimals) : "-"; }

std::string percent(double share) { return std::isfinite(share) ? fixed(100 * share, 1) + "%" : "-"; }

std::string milliseconds(double seconds) { return std::isfinite(seconds) ? fixed(seconds * 1e3, 2) : "-"; }

// Rounded to a whole number with thousands separators; NaN and infinities as "-".
std::string rounded_with_commas(double v) { return std::isfinite(v) ? with_commas(std::llround(v)) : "-"; }

std::string header(const BenchResult& r) {
  const BenchOptions& o = r.options;
  std::ostringstream os;
  os << "brigade bench pipeline" << (o.quick ? " (quick)" : "") << "\n"
     << "  model    GPT, " << o.layers << " blocks (" << o.layers + 2 << " pipeline layers), C=" << o.embd << ", "
     << o.heads << " heads, T=" << o.seq << ", vocab " << o.vocab << ", " << with_commas(r.parameters)
     << " parameters, " << (o.precision == DType::bf16 ? "bf16 compute with f32 weights" : "f32") << "\n"
     << "  batch    " << o.batch << " sequences = " << o.microbatches << " micro-batches of " << o.batch / o.microbatches
     << " (" << r.tokens_per_step << " tokens per step)\n"
     << "  pipeline P=" << o.stages << (o.stages == 1 ? " rank" : " ranks") << " on threads, " << (o.transport == "nccl" ? "NCCL" : "local") << " communicators; V="
     << o.chunks
     << " chunks per rank for interleaved; layers split evenly by count\n"
     << "  device   " << cli::device_choice_name(o.device) << " (" << r.device_name << "), " << r.cpu_threads << " hardware threads, CPU kernels use "
     << r.kernel_threads << "\n"
     << "  commit   " << r.env.git_commit << ", " << r.env.date << "\n"
     << "  steps    median of " << o.steps << " after " << o.warmup << " warm-up\n";
  if (o.device && o.device->is_cpu() && o.stages > r.cpu_threads) {
    // Then the ranks time-share the cores: an action's time includes waiting for one, and no
    // schedule can keep more than cpu_threads ranks computing at once.
    os << "  note     " << o.stages << " ranks share " << r.cpu_threads
       << " hardware threads: action times include waiting for a core, so bubbles and speed-ups are not those of "
          "one device per rank\n";
  }
  os << "\n";
  os << "unpipelined (one device, the micro-batches one after another): " << milliseconds(r.unpipelined_step.median)
     << " ms per step, " << rounded_with_commas(r.unpipelined_tokens_per_second) << " tokens/s\n\n";
  return os.str();
}

std::string main_table(const BenchResult& r) {
  std::vector<std::vector<std::string>> rows;
  std::string notes;
  for (const ScheduleResult& s : r.schedules) {
    if (!s.skipped.empty()) {
      notes += s.name + ": skipped, " + s.skipped + "\n";
      continue;
    }
    rows.push_back({s.name, milliseconds(s.step.median), rounded_with_commas(s.tokens_per_second),
                    fixed(s.speedup, 2) + "x", fixed(s.bubble, 4), fixed(s.predicted_bubble, 4),
                    fixed(s.unit_bubble, 4), percent(s.exposed_comm), percent(s.hidden_comm)});
  }
  return format_table({{"schedule"}, {"step ms", true}, {"tokens/s", true}, {"speed-up", true}, {"bubble", true},
                       {"predicted", true}, {"unit-cost", true}, {"exposed comm", true}, {"hidden", true}},
                      rows) +
         notes;
}

std::string costs_table(const BenchResult& r) {
  std::vector<std::vector<std::string>> rows;
  auto cell = [](double seconds, int64_t count) { return count > 0 ? milliseconds(seconds) : std::string("-"); };
  for (const ScheduleResult& s : r.schedules) {
    if (!s.skipped.empty()) continue;
    const ActionCosts& c = s.costs;
    rows.push_back({s.name, cell(c.forward, c.forwards), cell(c.backward, c.backwards),
                    cell(c.backward_input, c.backward_inputs), cell(c.backward_weight, c.backward_weights),
                    milliseconds(s.makespan), milliseconds(s.predicted_makespan)});
  }
  return "mean action costs (ms, per chunk) and the step's traced makespan against the simulator's\n" +
         format_table({{"schedule"}, {"F", true}, {"B", true}, {"I", true}, {"W", true}, {"makespan", true},
                       {"predicted", true}},
                      rows);
}

std::string ranks_table(const BenchResult& r) {
  std::vector<std::vector<std::string>> rows;
  for (const ScheduleResult& s : r.schedules) {
    for (size_t q = 0; q < s.ranks_detail.size(); ++q) {
      const RankResult& d = s.ranks_detail[q];
      rows.push_back({q == 0 ? s.name : "", std::to_string(q), percent(d.compute), percent(d.exchange),
                      percent(d.hidden), std::to_string(d.peak_stashed)});
    }
  }
  return "per rank (medians over the steps, shares of the step's makespan)\n" +
         format_table({{"schedule"}, {"rank", true}, {"compute", true}, {"exposed comm", true}, {"hidden", true},
                       {"peak stashed", true}},
                      rows);
}

// ---- JSON ----

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

template <class T>
std::string array(const std::vector<T>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out += ", ";
    if constexpr (std::is_same_v<T, std::string>) out += json_string(values[i]);
    else out += json_number(double(values[i]));
  }
  return out + "]";
}

std::string summary(const bench::Summary& s) {
  return "{\"median\": " + json_number(s.median) + ", \"min\": " + json_number(s.min) +
         ", \"max\": " + json_number(s.max) + ", \"mean\": " + json_number(s.mean) + "}";
}

void schedule_json(std::ostream& os, const ScheduleResult& s) {
  os << "    {\"name\": " << json_string(s.name) << ", \"ranks\": " << s.ranks << ", \"microbatches\": "
     << s.microbatches << ", \"chunks\": " << s.chunks;
  if (!s.skipped.empty()) {
    os << ", \"skipped\": " << json_string(s.skipped) << "}";
    return;
  }
  const ActionCosts& c = s.costs;
  os << ", \"skipped\": null,\n"
     << "     \"step_seconds\": " << array(s.step_seconds) << ", \"step\": " << summary(s.step) << ",\n"
     << "     \"tokens_per_second\": " << json_number(s.tokens_per_second)
     << ", \"speedup\": " << json_number(s.speedup) << ", \"loss\": " << json_number(s.loss) << ",\n"
     << "     \"bubbles\": " << array(s.bubbles) << ", \"bubble\": " << json_number(s.bubble)
     << ", \"makespan_seconds\": " << json_number(s.makespan) << ",\n"
     << "     \"mean_cost_seconds\": {\"F\": " << json_number(c.forwards ? c.forward : kNaN)
     << ", \"B\": " << json_number(c.backwards ? c.backward : kNaN) << ", \"I\": "
     << json_number(c.backward_inputs ? c.backward_input : kNaN) << ", \"W\": "
     << json_number(c.backward_weights ? c.backward_weight : kNaN) << "},\n"
     << "     \"action_counts\": {\"F\": " << c.forwards << ", \"B\": " << c.backwards << ", \"I\": " << c.backward_inputs
     << ", \"W\": " << c.backward_weights << "},\n"
     << "     \"predicted\": {\"bubble\": " << json_number(s.predicted_bubble)
     << ", \"makespan_seconds\": " << json_number(s.predicted_makespan) << "},\n"
     << "     \"unit_costs\": {\"bubble\": " << json_number(s.unit_bubble)
     << ", \"makespan\": " << json_number(s.unit_makespan) << ", \"busy_per_rank\": " << array(s.unit_busy) << "},\n"
     << "     \"exposed_comm\": " << json_number(s.exposed_comm)
     << ", \"hidden_comm\": " << json_number(s.hidden_comm) << ",\n"
     << "     \"per_rank\": [";
  for (size_t q = 0; q < s.ranks_detail.size(); ++q) {
    const RankResult& d = s.ranks_detail[q];
    os << (q ? ", " : "") << "{\"rank\": " << q << ", \"compute\": " << json_number(d.compute)
       << ", \"exposed_comm\": " << json_number(d.exchange) << ", \"hidden\": " << json_number(d.hidden)
       << ", \"peak_stashed\": " << d.peak_stashed << "}";
  }
  os << "],\n     \"data_parallel\": ";
  if (std::isfinite(s.dp_saved))
    os << "{\"at_end\": " << summary(s.dp_at_end) << ", \"overlapped\": " << summary(s.dp_overlapped)
       << ", \"saved\": " << json_number(s.dp_saved) << ", \"reductions\": " << s.dp_reductions
       << ", \"started_during_step\": " << s.dp_started_early << "}";
  else
    os << "null";
  os << ",\n     \"files\": " << array(s.files) << "}";
}

}  // namespace

std::string replicas_table(const BenchResult& r) {
  if (r.options.replicas <= 1) return "";
  std::vector<std::vector<std::string>> rows;
  for (const ScheduleResult& s : r.schedules) {
    if (!s.skipped.empty()) continue;
    rows.push_back({s.name, milliseconds(s.dp_at_end.median), milliseconds(s.dp_overlapped.median),
                    percent(s.dp_saved), std::to_string(s.dp_started_early) + " of " + std::to_string(s.dp_reductions)});
  }
  return "data parallelism: " + std::to_string(r.options.replicas) + " replicas x P=" +
         std::to_string(r.options.stages) + " over " + r.options.transport +
         " (step ms, medians; 'saved': the step time the overlap hid)\n" +
         format_table({{"schedule"}, {"reduce at end", true}, {"overlapped", true}, {"saved", true},
                       {"started during the step", true}},
                      rows) +
         "\n";
}

std::string result_text(const BenchResult& r) {
  std::ostringstream os;
  os << header(r) << main_table(r) << "\n" << costs_table(r) << "\n" << ranks_table(r) << "\n" << replicas_table(r);
  for (const auto& [name, meaning] : kDefinitions) {
    os << "  " << std::left << std::setw(14) << name << meaning << "\n";
  }
  return os.str();
}

std::string result_json(const BenchResult& r) {
  const BenchOptions& o = r.options;
  const bench::Environment& e = r.env;
  std::ostringstream os;
  os << "{\n"
     << "  \"benchmark\": \"pipeline\",\n"
     << "  \"date\": " << json_string(e.date) << ",\n"
     << "  \"git_commit\": " << json_string(e.git_commit) << ",\n"
     << "  \"device\": {\"type\": " << json_string(cli::device_choice_name(o.device)) << ", \"name\": " << json_string(r.device_name)
     << ", \"cpu_threads\": " << r.cpu_threads << ", \"kernel_threads\": " << r.kernel_threads
     << ", \"compute_capability\": " << json_string(e.compute_capability) << ", \"memory_gib\": "
     << json_number(e.memory_gib) << ", \"driver_version\": " << json_string(e.driver_version)
     << ", \"cuda_runtime_version\": " << json_string(e.runtime_version) << "},\n"
     << "  \"quick\": " << (o.quick ? "true" : "false") << ",\n"
     << "  \"model\": {\"layers\": " << o.layers << ", \"embd\": " << o.embd << ", \"heads\": " << o.heads
     << ", \"seq\": " << o.seq << ", \"vocab\": " << o.vocab << ", \"parameters\": " << r.parameters
     << ", \"precision\": " << json_string(cli::precision_choice_name(o.precision)) << "},\n"
     << "  \"batch\": " << o.batch << ", \"tokens_per_step\": " << r.tokens_per_step << ",\n"
     << "  \"transport\": " << json_string(o.transport) << ", \"replicas\": " << o.replicas << ",\n"
     << "  \"stages\": " << o.stages << ", \"microbatches\": " << o.microbatches << ", \"chunks\": " << o.chunks
     << ", \"steps\": " << o.steps << ", \"warmup\": " << o.warmup << ",\n"
     << "  \"definitions\": {";
  bool first = true;
  for (const auto& [name, meaning] : kDefinitions) {
    os << (first ? "" : ", ") << json_string(name) << ": " << json_string(meaning);
    first = false;
  }
  os << "},\n"
     << "  \"unpipelined\": {\"step_seconds\": " << array(r.unpipelined_seconds) << ", \"step\": "
     << summary(r.unpipelined_step) << ", \"tokens_per_second\": " << json_number(r.unpipelined_tokens_per_second)
     << ", \"loss\": " << json_number(r.unpipelined_loss) << "},\n"
     << "  \"schedules\": [\n";
  for (size_t i = 0; i < r.schedules.size(); ++i) {
    if (i) os << ",\n";
    schedule_json(os, r.schedules[i]);
  }
  os << "\n  ]\n}\n";
  return os.str();
}

}  // namespace brigade::bench_pipeline
