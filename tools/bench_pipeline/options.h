// Settings of `brigade bench pipeline` and the parser of its command line. Every flag lives in one
// table (options.cpp) that both parses and prints --help (tools/cli/flags.h).
//
// The model's size has no single good default: what keeps a CPU run under a minute on two cores is
// far too small to say anything about a GPU. So the size flags default to 0, "pick for the device",
// and resolve() fills them in once the device is known (--quick picks a tiny model and few steps).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/schedule.h"
#include "tools/cli/device_choice.h"
#include "tools/cli/flags.h"
#include "tools/cli/precision_choice.h"

namespace brigade::bench_pipeline {

struct BenchOptions {
  int stages = 4;        // P: pipeline ranks (threads)
  int microbatches = 8;  // M
  int chunks = 2;        // V for interleaved; zb-v and dualpipev hold 2, the others one chunk per rank
  int replicas = 1;      // R > 1: also time each schedule data-parallel, reductions overlapped and not
  std::string transport = "local";  // "local" (threads hand tensors over) or "nccl"
  std::vector<pipeline::ScheduleKind> schedules;  // empty: all of them
  std::string schedule_file;  // also time this schedule (PyTorch's CSV format; its P and M are the run's)
  int steps = 0;          // timed steps per schedule; 0: 10 (3 with --quick)
  int warmup = -1;        // untimed steps first; -1: 2 (1 with --quick)
  int64_t layers = 0;     // transformer blocks; 0: by device
  int64_t embd = 0;       // model width C; 0: by device
  int64_t heads = 0;      // attention heads; 0: by device
  int64_t seq = 0;        // tokens per sequence T; 0: by device
  int64_t batch = 0;      // sequences per step, split into M micro-batches; 0: by device
  int64_t vocab = 0;      // vocabulary size; 0: by device
  cli::DeviceChoice device;        // auto: cuda when this build and machine have a GPU
  cli::PrecisionChoice precision;  // the compute dtype (weights stay f32); auto: bf16 on a GPU, f32 on the CPU
  bool quick = false;     // a tiny model and three steps: what the tests run
  std::string json;       // write every number here (atomically)
  std::string trace_dir;  // write each schedule's Chrome trace and measured-vs-simulated SVG here

  // Fills in everything left to its default (device, precision, model size, steps: after it, device
  // and precision hold values) and checks that the device is here and what depends on several flags (batch divisible by M, embd by heads). Throws cli::UsageError naming the flags.
  void resolve();
};

using ParsedBenchArgs = cli::Parsed<BenchOptions>;

// Parses the arguments after `brigade bench pipeline`; throws cli::UsageError naming the flag.
ParsedBenchArgs parse_bench_args(const std::vector<std::string>& args);

std::string bench_usage();

}  // namespace brigade::bench_pipeline
