// Settings of `brigade plan` and the parser of its command line. Every flag lives in one table
// (options.cpp) that both parses and prints --help.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/analysis/planner.h"
#include "tools/cli/flags.h"

namespace brigade::plan_cli {

struct PlanOptions {
  // The model: a GPT-2 preset (tools/train/options.h), any of whose sizes the flags override.
  std::string model = "gpt2";
  pipeline::GptShape shape;  // filled from the preset, then the flags
  bool vocab_given = false;  // --vocab on the command line: passed on to `brigade train`
  int64_t vocab_unpadded = 0;  // the vocabulary as given; shape.vocab is it padded as train pads it
  // The devices. The defaults are an H100 SXM: 76 GiB of its 79.6 (80 GB), leaving room for the CUDA
  // context, NCCL's buffers and the allocator's cached blocks, which the model leaves out; the FLOP/s brigade's own GPT-2 small
  // training step reached on an H200 (bench/results/h200-gpt2-2026-11-26.md: 8 x 1024 tokens, 6N +
  // 12LCT FLOPs each, in 29.5 ms with bf16 = 240 TFLOP/s, a quarter of the 989 dense peak both GPUs
  // list; in 319 ms with f32 = 22); NVLink between two GPUs at an effective 200 GB/s each way (PCIe
  // 5.0 x16 gives about 50).
  int devices = 8;
  int64_t memory = int64_t(76) << 30;
  std::string memory_text = "76GiB";  // as given: the printed lines pass it to --memory-budget
  double tflops = 0;  // 0: by precision, as above
  double bandwidth = 200;  // GB/s
  double latency = 10;     // microseconds per message
  // The step and the search.
  int64_t batch = 64;  // sequences per step
  DType precision = DType::bf16;  // the activations'
  std::vector<pipeline::ScheduleKind> schedules = pipeline::all_schedule_kinds();
  int max_chunks = 4;
  std::string recompute = "both";  // on, off or both
  int top = 5;
  std::string data = "DIR";  // what the printed `brigade train` lines pass as --data

  double tflops_or_default() const;
  pipeline::PlanSpec spec() const;
};

using UsageError = cli::UsageError;

// The sizes of a --model preset (nn::gpt_presets(), with its vocabulary and family); throws UsageError
// naming --model for an unknown name.
pipeline::GptShape preset_shape(const std::string& model);

using ParsedPlanArgs = cli::Parsed<PlanOptions>;

// Parses the arguments after `brigade plan`. Accepts `--flag value` and `--flag=value`; throws
// UsageError naming the flag.
ParsedPlanArgs parse_plan_args(const std::vector<std::string>& args);

std::string plan_usage();

}  // namespace brigade::plan_cli
