// Settings of `brigade train` and the parser of its command line.
//
// Every flag lives in one table (options.cpp) that both parses and prints --help, so the usage
// text can't drift from what the parser accepts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/memory_limit.h"
#include "kernels/ops.h"
#include "pipeline/partition_method.h"
#include "pipeline/schedule.h"
#include "tools/cli/device_choice.h"
#include "tools/cli/flags.h"
#include "tools/cli/gpt_flags.h"
#include "tools/cli/precision_choice.h"

namespace brigade::train {

struct TrainOptions {
  // Run
  cli::DeviceChoice device;  // auto: cuda when this build has CUDA and a GPU is visible, else cpu
  // The activations' dtype; the weights, their gradients and AdamW's state stay f32 (master weights).
  // auto: bf16 on a GPU, f32 on the CPU (cli::precision_on says why).
  cli::PrecisionChoice precision;
  // The GEMM behind every matmul on a GPU (the CPU has one GEMM and ignores it).
  ops::MatmulBackend matmul = ops::MatmulBackend::automatic;
  int64_t steps = 1000;
  uint64_t seed = 1;
  int threads = 0;  // 0: brigade's default (hardware threads or BRIGADE_NUM_THREADS)
  // Optimisation: AdamW, gradient clipping, linear warm-up then cosine decay to lr * min_lr_ratio.
  int64_t batch = 32;
  double lr = 3e-3;
  int64_t warmup = 50;
  double weight_decay = 0.01;
  double clip = 1.0;
  // Model (brigade::nn::GPT). A preset (--model gpt2, llama-1b, ...: nn/gpt_presets.h) sets layers,
  // heads, embd, context and the family's sizes; flags given on the command line override it, wherever they stand.
  std::string model;
  int64_t layers = 4;  // as many blocks as the default stages, so every rank of the default run holds one
  int64_t heads = 4;
  int64_t embd = 48;   // narrow: four blocks of 48 cost about what two of 64 do
  // The family (--arch gpt2 or llama) and what only it sizes (--kv-heads, --mlp-hidden, --rope-theta,
  // --untied); a llama preset sets them too.
  cli::DecoderFlags decoder;
  // Task: sort `digits` digits (sequence length 2 * digits), or with `data`, language modelling on
  // that directory's token shards (text_task.h), windows of `context` tokens. vocab 0: the
  // tokenizer's in the directory (or GPT-2's for bare llm.c shards).
  int64_t digits = 12;
  std::string data;
  int64_t context = 128;
  int64_t vocab = 0;
  std::string init_from;  // start from these weights (a checkpoint's model only: step 0, fresh optimizer)
  // The model's vocabulary when it is not the task's (padded) one: a Hugging Face --init-from model's
  // (init_from_model.h), whose rows are all kept. 0: the task's.
  int64_t model_vocab = 0;
  // Pipeline (pipeline/): the model cut into `stages` stages, each a rank — a thread of this process,
  // or a process of `brigade launch -n N` (then N = stages * replicas). 0 stages: no pipeline at
  // all, the plain one-device loop.
  int64_t stages = 4;
  pipeline::ScheduleKind schedule = pipeline::ScheduleKind::one_f_one_b;
  // A schedule file in PyTorch's CSV format (pipeline/schedule_csv.h) instead of `schedule`; parsing
  // reads it and sets stages, microbatches and chunks from it.
  std::string schedule_file;
  // Micro-batches per step, in a pipeline and on one device alike (a Trainer without pipeline groups
  // accumulates their gradients as a pipeline does). The command line's --stages 0 sets 1 (the whole
  // batch at once) unless --microbatches is given.
  int64_t microbatches = 8;
  int64_t chunks = 0;    // per rank; 0: the schedule's own (2 for interleaved and zb-v, else 1)
  int64_t replicas = 1;  // data-parallel copies of the pipeline (threads; launched: from the world size)
  bool recompute = false;
  // How layers are split into stages (pipeline/partition.h): by count, by parameters, by time
  // measured once on this device (pipeline rank 0 measures; every rank uses its numbers), balanced
  // (measured time and stash, blocks cut into their two halves, within memory_budget), or auto:
  // balanced where the stages run at once (GPUs, or a core per rank thread), else by parameters: nullopt.
  std::optional<pipeline::PartitionMethod> partition;
  int64_t memory_budget = 0;  // bytes per rank for --partition balanced; 0: no limit
  // The most this process may reserve on its GPU (core/memory_limit.h; the caching allocator
  // enforces it). GPU only; the rank threads of one process share it.
  DeviceMemoryLimit memory_limit;
  std::string trace = "brigade-trace.json";    // Chrome trace of the last step ("" or none: off)
  std::string svg = "brigade-timeline.svg";    // simulated vs measured timeline of the last step
  // JSON Lines of every progress line and validation (metrics.h), continued on resume; "": none. With
  // it, the loss curves drawn from it at the end (loss_curve.h) go to `curves` ("" or none: off).
  std::string metrics;
  std::string curves = "brigade-loss.svg";
  // Reporting and checkpoints
  int64_t log_every = 100;
  // The final evaluation: held-out sequences (sort) or validation windows (--data).
  int64_t eval_examples = 500;
  // Validation loss every N steps (--data only); 0: every 5 progress lines.
  int64_t eval_every = 0;
  // A file, written at the end (and every save_every steps); or a directory (one that exists, or a
  // path ending in '/'), which gets one file per save and is resumed from automatically
  // (checkpoint_dir.h).
  std::string save;
  int64_t save_every = 0;  // 0: only at the end
  int64_t keep = 2;        // checkpoints a --save directory keeps (the newest)
  std::string resume;      // checkpoint to continue from (wins over a --save directory's)

  static constexpr double min_lr_ratio = 0.1;

  int64_t chunks_or_default() const;  // chunks, or the schedule's own when 0
};

// "auto" or the method's name, as --partition spells it.
std::string partition_name(const std::optional<pipeline::PartitionMethod>& method);

// A bad command line (tools/cli/flags.h): the message names the flag; the command prints it
// and the usage, and exits with status 2.
using UsageError = cli::UsageError;

// help: --help / -h was given (print usage, train nothing)
using ParsedTrainArgs = cli::Parsed<TrainOptions>;

// Parses the arguments after `brigade train`. Accepts `--flag value` and `--flag=value`.
ParsedTrainArgs parse_train_args(const std::vector<std::string>& args);

// The --help text: every flag with its meaning and default.
std::string train_usage();

}  // namespace brigade::train
