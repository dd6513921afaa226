#include "bench_pipeline/options.h"

#include <algorithm>
#include <charconv>
#include <iomanip>
#include <utility>

#include "comm/nccl.h"
#include "core/device.h"
#include "core/error.h"
#include "pipeline/schedule.h"
#include "tools/cli/schedule_choice.h"

namespace brigade::bench_pipeline {

namespace {

using cli::parse_int;

using cli::UsageError;
using Flag = cli::Flag<BenchOptions>;

using cli::bad_flag;

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, ',')) out.push_back(item);
  return out;
}

template <class T>
Flag number_flag(std::string name, std::string value, std::string help, T BenchOptions::*field, int64_t min,
                 int64_t max, std::string unset = "") {
  return {name, std::move(value), std::move(help),
          [name, field, min, max](BenchOptions& o, const std::string& v) { o.*field = T(parse_int(name, v, min, max)); },
          [field, unset](const BenchOptions& o) {
            return !unset.empty() && o.*field <= 0 ? unset : std::to_string(o.*field);
          }};
}

const std::vector<Flag>& flags() {
  static const std::vector<Flag> table = {
      number_flag("--stages", "P", "pipeline ranks P (one thread each)", &BenchOptions::stages, 1, 64),
      number_flag("--microbatches", "M", "micro-batches per step", &BenchOptions::microbatches, 1, 4096),
      number_flag("--chunks", "V", "chunks per rank for interleaved (needs M % P == 0)", &BenchOptions::chunks, 2, 16),
      number_flag("--replicas", "R",
                  "data-parallel replicas; R > 1 also times each schedule on R x P ranks with the gradient "
                  "all-reduces overlapped with the backward and at the end of the step",
                  &BenchOptions::replicas, 1, 64),
      {"--transport", "T", "local or nccl (NCCL ranks on the GPUs in turn; one GPU needs NCCL >= 2.30.3)",
       [](BenchOptions& o, const std::string& v) {
         if (v != "local" && v != "nccl") bad_flag("--transport", "expected local or nccl, got '" + v + "'");
         o.transport = v;
       },
       [](const BenchOptions& o) { return o.transport; }},
      {"--schedules", "LIST", "comma-separated, of " + pipeline::schedule_names(),
       [](BenchOptions& o, const std::string& v) {
         o.schedules.clear();
         for (const std::string& name : split_commas(v)) {
           const pipeline::ScheduleKind kind = cli::parse_schedule("--schedules", name);
           for (pipeline::ScheduleKind seen : o.schedules)
             if (seen == kind) bad_flag("--schedules", "'" + name + "' is listed twice");
           o.schedules.push_back(kind);
         }
         if (o.schedules.empty()) bad_flag("--schedules", "expected at least one schedule");
       },
       [](const BenchOptions&) { return std::string("all"); }},
      cli::text_flag("--schedule-file", "FILE",
                     "also time the schedule in FILE (PyTorch's CSV format, e.g. from brigade simulate --write-schedule; "
                     "its P and M must be --stages and --microbatches)",
                     &BenchOptions::schedule_file),
      number_flag("--steps", "N", "timed steps per schedule (medians over these)", &BenchOptions::steps, 1, 100000,
                  "10; 3 with --quick"),
      {"--warmup", "K", "untimed steps before them",
       [](BenchOptions& o, const std::string& v) { o.warmup = int(parse_int("--warmup", v, 0, 100000)); },
       [](const BenchOptions&) { return std::string("2; 1 with --quick"); }},
      number_flag("--layers", "N", "transformer blocks (the pipeline cuts N + 2 layers)", &BenchOptions::layers, 1,
                  1024, "by device"),
      number_flag("--embd", "C", "model width", &BenchOptions::embd, 1, 1 << 16, "by device"),
      number_flag("--heads", "H", "attention heads (must divide --embd)", &BenchOptions::heads, 1, 1024, "by device"),
      number_flag("--seq", "T", "tokens per sequence", &BenchOptions::seq, 1, 1 << 20, "by device"),
      number_flag("--batch", "B", "sequences per step (a multiple of M)", &BenchOptions::batch, 1, 1 << 20,
                  "by device"),
      number_flag("--vocab", "N", "vocabulary size", &BenchOptions::vocab, 2, 1 << 24, "by device"),
      {"--device", "DEV", "cpu, cuda or cuda:N",
       [](BenchOptions& o, const std::string& v) { o.device = cli::parse_device("--device", v, false); },
       [](const BenchOptions&) { return std::string("cuda with a GPU, else cpu"); }},
      {"--precision", "P", "f32 or bf16 compute (weights stay f32)",
       [](BenchOptions& o, const std::string& v) { o.precision = cli::parse_precision("--precision", v, false); },
       [](const BenchOptions&) { return std::string("bf16 on a GPU, else f32"); }},
      {"--quick", "", "a tiny model and 3 steps: a smoke run in seconds",
       [](BenchOptions& o, const std::string&) { o.quick = true; }, [](const BenchOptions&) { return std::string("off"); }},
      {"--json", "FILE", "also write every number as JSON (atomically)",
       [](BenchOptions& o, const std::string& v) {
         if (v.empty()) bad_flag("--json", "expected a file name");
         o.json = v;
       },
       [](const BenchOptions&) { return std::string("none"); }},
      {"--trace-dir", "DIR", "write each schedule's Chrome trace and measured-vs-simulated SVG here",
       [](BenchOptions& o, const std::string& v) {
         if (v.empty()) bad_flag("--trace-dir", "expected a directory");
         o.trace_dir = v;
       },
       [](const BenchOptions&) { return std::string("none"); }},
  };
  return table;
}

// A model size: what the size flags fall back to.
struct Size {
  int64_t layers, embd, heads, seq, batch, vocab;
};

// CPU: all seven schedules in well under a minute on two cores. GPU: large enough that a
// stage's kernels take longer than launching them, so the timeline is the GPU's, not the host's; 14
// blocks make 16 pipeline layers, 4 per stage at P = 4 and 2 per chunk with V = 2.
constexpr Size kQuick = {6, 32, 2, 16, 16, 64};
constexpr Size kCpu = {6, 128, 4, 64, 16, 256};
constexpr Size kGpu = {14, 768, 12, 512, 32, 8192};

}  // namespace

void BenchOptions::resolve() {
  // A missing GPU is a usage error here, before anything is measured: the sizes depend on the device.
  const Device d = cli::device_or_default(device);
  if (d.is_cuda() && !cuda_available())
    throw UsageError("--device " + d.str() + ": no GPU here (no CUDA device, or a build without CUDA)");
  device = d;
  precision = cli::precision_on(precision, d);
  const Size& size = quick ? kQuick : d.is_cuda() ? kGpu : kCpu;
  // A flag given on the command line wins over the defaults.
  const bool batch_given = batch > 0;
  if (layers <= 0) layers = size.layers;
  if (embd <= 0) embd = size.embd;
  if (heads <= 0) heads = size.heads;
  if (seq <= 0) seq = size.seq;
  if (vocab <= 0) vocab = size.vocab;
  if (batch <= 0) {
    // At least the default, and whole micro-batches: round up to a multiple of M.
    batch = (std::max<int64_t>(size.batch, microbatches) + microbatches - 1) / microbatches * microbatches;
  }
  if (steps <= 0) steps = quick ? 3 : 10;
  if (warmup < 0) warmup = quick ? 1 : 2;
  if (schedules.empty()) schedules = pipeline::all_schedule_kinds();

  if (batch_given && batch % microbatches != 0) {
    throw UsageError("--batch " + std::to_string(batch) + " does not split into --microbatches " +
                     std::to_string(microbatches) + " equal micro-batches; use a multiple of " +
                     std::to_string(microbatches));
  }
  if (transport == "nccl" && !d.is_cuda()) {
    throw UsageError("--transport nccl needs a GPU device (--device " + d.str() + ")");
  }
  if (transport == "nccl" && !comm::nccl_available()) {
    throw UsageError("--transport nccl: this build has no NCCL");
  }
  if (embd % heads != 0) {
    throw UsageError("--embd " + std::to_string(embd) + " is not divisible by --heads " + std::to_string(heads));
  }
}

ParsedBenchArgs parse_bench_args(const std::vector<std::string>& args) {
  ParsedBenchArgs out;
  cli::parse_flags(args, flags(), out.options, out.help);
  return out;
}

std::string bench_usage() {
  return cli::usage_text(
      "usage: brigade bench pipeline [flags]\n\n"
      "Runs real pipeline steps of a GPT for each schedule (P ranks as threads, local or NCCL\n"
      "communicators; on a GPU each rank on its own stream) and reports: step time, tokens/s and the\n"
      "speed-up over the same model unpipelined; the measured bubble against the simulator's\n"
      "prediction from the measured mean action costs; how much of each rank's time went to exchanging\n"
      "messages and how much of that other ranks computed through; and with --replicas, how much step\n"
      "time starting the gradient all-reduces during the backward saves.\n\n"
      "example: brigade bench pipeline --stages 4 --microbatches 8 --json pipeline.json --trace-dir traces\n\n"
      "flags:\n",
      flags());
}

}  // namespace brigade::bench_pipeline
