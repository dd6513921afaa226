#include "curves/command.h"

#include <ostream>

#include "tools/cli/command.h"
#include "train/loss_curve.h"
#include "train/metrics.h"

namespace brigade::curves_cli {

namespace {

struct CurvesOptions {
  std::string metrics;                // the run's --metrics file (required)
  std::string out = "brigade-loss.svg";  // brigade train --curves' default
};

using ParsedCurvesArgs = cli::Parsed<CurvesOptions>;

using Flag = cli::Flag<CurvesOptions>;

const std::vector<Flag>& flags() {
  static const std::vector<Flag> table = {
      cli::text_flag("--metrics", "FILE", "the JSON Lines file of `brigade train --metrics FILE`",
                     &CurvesOptions::metrics, "required"),
      {"--out", "PATH", "the SVG to write", [](CurvesOptions& o, const std::string& v) { o.out = v; },
       [](const CurvesOptions& o) { return o.out; }},
  };
  return table;
}

ParsedCurvesArgs parse_curves_args(const std::vector<std::string>& args) {
  ParsedCurvesArgs out;
  cli::parse_flags(args, flags(), out.options, out.help);
  if (!out.help && out.options.metrics.empty()) throw cli::UsageError("--metrics: required");
  return out;
}

std::string curves_usage() {
  return cli::usage_text(
      "usage: brigade curves --metrics FILE [--out PATH]\n\n"
      "Draws the loss curves of a `brigade train --metrics FILE` run: training and validation loss over\n"
      "steps, and tokens per second. The picture is the one the run writes at its end (--curves).\n\nflags:\n",
      flags());
}

}  // namespace

int curves_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  return cli::run_command(
      "brigade curves", out, err, [&] { return parse_curves_args(args); }, [] { return curves_usage(); },
      [&](const CurvesOptions& o) {
        const std::vector<train::MetricsRecord> records = train::read_metrics(o.metrics);
        train::save_loss_curve(o.out, records);
        out << "loss curves: " << o.out << " (" << records.size() << " records from " << o.metrics << ")\n";
        return 0;
      });
}

}  // namespace brigade::curves_cli
