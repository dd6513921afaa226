#include "bench_pipeline/command.h"

#include <exception>
#include <ostream>

#include "bench_pipeline/benchmark.h"
#include "bench_pipeline/options.h"
#include "bench_pipeline/report.h"
#include "core/atomic_file.h"
#include "core/cuda/module_loading.h"

namespace brigade::bench_pipeline {

int bench_pipeline_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  // --transport nccl puts every rank in this process, on the GPUs in turn: that needs CUDA's eager
  // module loading (core/cuda/module_loading.h), asked for before anything starts CUDA.
  cuda::prefer_eager_module_loading();
  ParsedBenchArgs parsed;
  try {
    parsed = parse_bench_args(args);
    if (!parsed.help) parsed.options.resolve();
  } catch (const cli::UsageError& e) {
    err << "brigade bench pipeline: " << e.what() << "\n\n" << bench_usage();
    return 2;
  }
  if (parsed.help) {
    out << bench_usage();
    return 0;
  }
  try {
    const BenchResult result = run_benchmark(parsed.options, err);
    out << "\n" << result_text(result);
    if (!parsed.options.json.empty()) {
      // A reader (or a results file being replaced) never sees half a report.
      write_file_atomically(parsed.options.json, result_json(result), "--json");
      out << "\nwrote " << parsed.options.json << "\n";
    }
    if (!parsed.options.trace_dir.empty()) {
      out << "\nper schedule, in " << parsed.options.trace_dir
          << ": <schedule>.trace.json (the typical step's Chrome trace: open in ui.perfetto.dev) and <schedule>.svg "
             "(its timeline under the simulator's with the measured costs)\n";
    }
    return 0;
  } catch (const std::exception& e) {
    err << "brigade bench pipeline: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace brigade::bench_pipeline
