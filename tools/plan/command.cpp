#include "command.h"

#include <algorithm>
#include <cmath>
#include <ostream>

#include "command_line.h"
#include "core/format.h"
#include "options.h"
#include "tools/cli/command.h"

namespace brigade::plan_cli {

namespace {

using namespace brigade::pipeline;

std::string milliseconds(double seconds) { return format_fixed(seconds * 1e3, 2) + " ms"; }

// The unit the per-rank peaks are listed in: the largest binary unit in which the largest is >= 1.
std::pair<double, std::string> unit_for(int64_t bytes) {
  if (bytes >= int64_t(1) << 30) return {double(int64_t(1) << 30), "GiB"};
  if (bytes >= int64_t(1) << 20) return {double(int64_t(1) << 20), "MiB"};
  return {1024.0, "KiB"};
}

// Numbers right-aligned, the columns in `left` (words, lists) left-aligned.
std::string table(const std::vector<std::vector<std::string>>& rows, const std::vector<size_t>& left) {
  std::vector<size_t> width(rows.front().size(), 0);
  for (const auto& row : rows)
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      const std::string fill(width[c] - row[c].size(), ' ');
      line += std::count(left.begin(), left.end(), c) ? row[c] + fill : fill + row[c];
      if (c + 1 < row.size()) line += "  ";
    }
    line.erase(line.find_last_not_of(' ') + 1);
    out += line + "\n";
  }
  return out;
}

// At least `bytes`, rounded up to a tenth of the unit it is shown in: a --memory the user can type.
std::string memory_flag_value(int64_t bytes) {
  const auto [scale, unit] = unit_for(bytes);
  const double tenths = std::ceil(double(bytes) / scale * 10);
  return format_fixed(tenths / 10, 1) + unit;
}

// How far `brigade plan` looks for the fewest devices that hold a model, when --devices is smaller.
constexpr int kFewestDevicesSearched = 64;

int run(const PlanOptions& o, std::ostream& out, std::ostream& err) {
  const PlanSpec spec = o.spec();
  const GptShape& m = o.shape;
  const GptShape preset = preset_shape(o.model);
  const bool resized = m.layers != preset.layers || m.heads != preset.heads || m.embd != preset.embd ||
                       m.context != preset.context || o.vocab_unpadded != preset.vocab;
  out << "model: " << o.model << (resized ? " resized: " : ", ") << m.layers << " layers, " << m.heads << " heads, "
      << m.embd << " wide, " << m.context << "-token context, vocabulary " << o.vocab_unpadded
      << (m.vocab != o.vocab_unpadded ? " (padded to " + std::to_string(m.vocab) + ")" : "") << ": "
      << with_commas(gpt_parameter_count(m)) << " parameters; " << m.pipeline_layers()
      << " pipeline layers (the embedding, each block's attention and MLP halves, the head)\n";
  out << "devices: " << o.devices << " x " << format_bytes(double(o.memory)) << ", "
      << format_significant(o.tflops_or_default(), 4) << " TFLOP/s effective (" << dtype_name(o.precision) << "), links "
      << format_significant(o.bandwidth, 4) << " GB/s + " << format_significant(o.latency, 4) << " us per message\n";
  out << "batch: " << o.batch << " sequences (" << with_commas(o.batch * m.context) << " tokens) per step\n";

  // What the model takes at the least: the fewest devices of this memory that hold it (ranks build
  // only their own layers, so a model larger than one device fits on several).
  const FewestDevices fewest = fewest_devices(spec, std::max(o.devices, kFewestDevicesSearched));
  const std::string fewest_line =
      fewest.devices == 0
          ? "no configuration of up to " + std::to_string(std::max(o.devices, kFewestDevicesSearched)) +
                " devices of " + format_bytes(double(o.memory)) + " holds it"
          : std::to_string(fewest.devices) + " device" + (fewest.devices > 1 ? "s" : "") + " of " +
                format_bytes(double(o.memory)) + " (" + fewest.candidate.describe() + ", " +
                format_bytes(double(fewest.needed)) + " per device)";
  out << "fewest devices that hold it: " << fewest_line << "\n";

  Plan result;
  try {
    result = plan(spec, o.top);
  } catch (const NoPlanError& e) {
    err << "brigade plan: error: " << e.what() << ". Give --memory " << memory_flag_value(e.needed)
        << " or more, more --devices (fewest that hold it: " << fewest_line << "), or a smaller --batch\n";
    return 1;
  }
  out << "searched " << result.candidates << " configurations: " << result.out_of_memory << " out of memory, "
      << result.pruned << " skipped (a lower bound on their step is above the top " << o.top << "'s slowest), "
      << result.simulated << " simulated\n\n";

  int64_t largest_peak = 0;  // the per-rank column's unit suits the largest peak listed
  for (const Evaluation& e : result.best) largest_peak = std::max(largest_peak, e.peak);
  const auto [scale, unit] = unit_for(largest_peak);
  std::vector<std::vector<std::string>> rows = {{"#", "schedule", "P x V", "M", "D", "recompute", "step", "bubble",
                                                 "reduce", "peak", std::string("peak per rank (").append(unit) + ")"}};
  for (size_t i = 0; i < result.best.size(); ++i) {
    const Evaluation& e = result.best[i];
    const Candidate& c = e.candidate;
    std::string per_rank;
    for (int64_t peak : e.peak_per_rank) {
      if (!per_rank.empty()) per_rank += ' ';
      per_rank += format_fixed(double(peak) / scale, 1);
    }
    rows.push_back({std::to_string(i + 1), schedule_name(c.schedule),
                    std::to_string(c.stages) + " x " + std::to_string(c.chunks), std::to_string(c.microbatches),
                    std::to_string(c.replicas), c.recompute ? "on" : "off", milliseconds(e.step),
                    format_fixed(e.bubble, 3), milliseconds(e.all_reduce), format_bytes(double(e.peak)), per_rank});
  }
  out << table(rows, {1, 10});
  out << "\nstep: the simulated pipeline, then the gradient reductions (reduce: the longest rank's); bubble: the "
         "pipeline's idle share;\npeak: predicted per rank (held all step, gradients, stashes, buffers, workspace). "
         "docs/pipeline.md, \"The planner\", says what the model leaves out.\n\nto run:\n";
  for (size_t i = 0; i < result.best.size(); ++i)
    out << "  " << i + 1 << ": " << run_command_line(o, result.best[i].candidate) << "\n";
  return 0;
}

}  // namespace

int plan_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  return cli::run_command(
      "brigade plan", out, err, [&] { return parse_plan_args(args); }, [] { return plan_usage(); },
      [&](const PlanOptions& options) { return run(options, out, err); });
}

}  // namespace brigade::plan_cli
