#include "options.h"

#include <charconv>
#include <cmath>
#include <iomanip>
#include <utility>

#include "core/error.h"
#include "pipeline/schedule.h"
#include "tools/cli/schedule_choice.h"

namespace brigade::simulate_cli {

namespace {

using cli::parse_int;

using cli::bad_flag;

double parse_cost(const std::string& flag, const std::string& text) {
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v)) {
    bad_flag(flag, "expected a number, got '" + text + "'");
  }
  if (v < 0) bad_flag(flag, "must be non-negative, got " + text);
  return v;
}

using Flag = cli::Flag<SimulateOptions>;

// Sizes are capped well above anything readable; the schedule generator refuses what is too big.
Flag int_flag(std::string name, std::string value, std::string help, int SimulateOptions::*field, int min, int max) {
  return {name, std::move(value), std::move(help),
          [name, field, min, max](SimulateOptions& o, const std::string& v) {
            o.*field = int(parse_int(name, v, min, max));
          },
          [field](const SimulateOptions& o) { return std::to_string(o.*field); }};
}

// "2" sets every stage's cost; "1,1,3,1" sets one cost per stage (`per_stage`), and `uniform` to
// the list's first entry only so that it holds a valid number (the simulator uses the list).
Flag cost_flag(std::string name, std::string help, double SimulateOptions::*uniform,
               std::vector<double> SimulateOptions::*per_stage) {
  return {name, "X[,X...]", std::move(help),
          [name, uniform, per_stage](SimulateOptions& o, const std::string& v) {
            std::vector<double> values;
            size_t from = 0;
            while (true) {
              const size_t comma = v.find(',', from);
              const std::string item = v.substr(from, comma == std::string::npos ? std::string::npos : comma - from);
              try {
                values.push_back(parse_cost(name, item));
              } catch (const UsageError& e) {
                if (v.find(',') == std::string::npos) throw;
                bad_flag(name, "stage " + std::to_string(values.size()) + "'s cost: " +
                                   std::string(e.what()).substr(name.size() + 2));
              }
              if (comma == std::string::npos) break;
              from = comma + 1;
            }
            o.*uniform = values.front();
            o.*per_stage = values.size() > 1 ? values : std::vector<double>{};
          },
          [uniform](const SimulateOptions& o) { return cli::show_number(o.*uniform); }};
}

// A cost that is one number for every stage.
Flag cost_flag(std::string name, std::string help, double SimulateOptions::*field) {
  return {name, "X", std::move(help),
          [name, field](SimulateOptions& o, const std::string& v) { o.*field = parse_cost(name, v); },
          [field](const SimulateOptions& o) { return cli::show_number(o.*field); }};
}

const std::vector<Flag>& flags() {
  static const std::vector<Flag> table = {
      {"--schedule", "NAME", pipeline::schedule_names(),
       [](SimulateOptions& o, const std::string& v) { o.schedule = cli::parse_schedule("--schedule", v); },
       [](const SimulateOptions& o) { return std::string(pipeline::schedule_name(o.schedule)); }},
      int_flag("--stages", "P", "pipeline ranks P (with V chunks each: P*V stages)", &SimulateOptions::stages, 1, 4096),
      int_flag("--microbatches", "M", "micro-batches M per step", &SimulateOptions::microbatches, 1, 1 << 20),
      {"--chunks", "V", "chunks per rank (interleaved: 2 or more; zb-v, dualpipev: 2)",
       [](SimulateOptions& o, const std::string& v) { o.chunks = int(parse_int("--chunks", v, 1, 64)); },
       [](const SimulateOptions&) { return std::string("2 for interleaved, zb-v and dualpipev, else 1"); }},
      cost_flag("--cost-f", "time of a forward (one chunk); a comma-separated list gives each stage its own",
                &SimulateOptions::cost_f, &SimulateOptions::stage_f),
      cost_flag("--cost-b", "time of a backward's input-gradient half (I); a whole B costs b + w; a list: per stage",
                &SimulateOptions::cost_b, &SimulateOptions::stage_b),
      cost_flag("--cost-w", "time of a backward's weight-gradient half (W); a list: per stage",
                &SimulateOptions::cost_w, &SimulateOptions::stage_w),
      cost_flag("--cost-comm", "time from a SEND until its message can be received", &SimulateOptions::cost_comm),
      {"--activation-bytes", "N", "bytes of one activation message, to total the traffic",
       [](SimulateOptions& o, const std::string& v) {
         o.activation_bytes = parse_int("--activation-bytes", v, 0, int64_t(1) << 50);
       },
       [](const SimulateOptions& o) { return std::to_string(o.activation_bytes); }},
      {"--svg", "FILE", "also draw the timeline as an SVG picture",
       [](SimulateOptions& o, const std::string& v) {
         if (v.empty()) bad_flag("--svg", "expected a file name");
         o.svg = v;
       },
       [](const SimulateOptions& o) { return o.svg.empty() ? std::string("none") : o.svg; }},
      int_flag("--width", "N", "most characters of time in the terminal chart", &SimulateOptions::width, 10, 100000),
      {"--schedule-file", "FILE", "run this schedule (PyTorch's CSV format) instead of --schedule; it gives P, M and V",
       [](SimulateOptions& o, const std::string& v) {
         if (v.empty()) bad_flag("--schedule-file", "expected a file name");
         o.schedule_file = v;
       },
       [](const SimulateOptions& o) { return o.schedule_file.empty() ? std::string("none") : o.schedule_file; }},
      {"--write-schedule", "FILE", "also write the schedule to FILE in PyTorch's CSV format",
       [](SimulateOptions& o, const std::string& v) {
         if (v.empty()) bad_flag("--write-schedule", "expected a file name");
         o.write_schedule = v;
       },
       [](const SimulateOptions& o) { return o.write_schedule.empty() ? std::string("none") : o.write_schedule; }},
      {"--grid", "", "also print the schedule itself: every rank's actions, step by step",
       [](SimulateOptions& o, const std::string&) { o.grid = true; },
       [](const SimulateOptions&) { return std::string("off"); }},
  };
  return table;
}

}  // namespace

int SimulateOptions::chunks_or_default() const {
  return chunks > 0 ? chunks : pipeline::default_chunks(schedule);
}

ParsedSimulateArgs parse_simulate_args(const std::vector<std::string>& args) {
  ParsedSimulateArgs out;
  cli::parse_flags(args, flags(), out.options, out.help);
  if (!out.options.schedule_file.empty())
    for (const char* shape : {"--schedule", "--stages", "--microbatches", "--chunks"})
      if (cli::flag_given(args, shape))
        bad_flag("--schedule-file", std::string("the file gives the schedule, its ranks, micro-batches and chunks; drop ") +
                                        shape);
  return out;
}

std::string simulate_usage() {
  return cli::usage_text(
      "usage: brigade simulate [flags]\n\n"
      "Dry-runs a pipeline-parallel schedule: P ranks, M micro-batches, V chunks per rank. Checks it\n"
      "(every dependency, no deadlock), prints its bubble, stashed activations and messages, and draws\n"
      "its timeline. Costs are in arbitrary time units. A cost given as a comma-separated list has one\n"
      "value per stage, in stage order (P*V of them; stage s runs on rank s % P): --cost-f 2,1,1,3.\n\n"
      "example: brigade simulate --stages 4 --microbatches 16 --schedule zb-h1 --svg zb.svg\n"
      "         brigade simulate --schedule-file zbv.csv   (a schedule from PyTorch's _dump_csv)\n\nflags:\n",
      flags());
}

}  // namespace brigade::simulate_cli
