#include "options.h"

#include <charconv>
#include <cmath>
#include <iomanip>
#include <sstream>

#include "core/error.h"
#include "core/format.h"
#include "init_from_model.h"
#include "nn/gpt_presets.h"
#include "pipeline/schedule.h"
#include "pipeline/schedule_csv.h"
#include "tools/cli/matmul_choice.h"
#include "tools/cli/schedule_choice.h"

namespace brigade::train {

namespace {

using cli::parse_int;

using cli::bad_flag;

double parse_positive(const std::string& flag, const std::string& text, bool allow_zero) {
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v)) {
    bad_flag(flag, "expected a number, got '" + text + "'");
  }
  if (v < 0 || (v == 0 && !allow_zero)) bad_flag(flag, std::string("must be ") + (allow_zero ? "non-negative" : "positive") + ", got " + text);
  return v;
}

using Flag = cli::Flag<TrainOptions>;

Flag int_flag(std::string name, std::string help, int64_t TrainOptions::*field, int64_t min) {
  return {name, "N", std::move(help),
          [name, field, min](TrainOptions& o, const std::string& v) { o.*field = parse_int(name, v, min); },
          [field](const TrainOptions& o) { return std::to_string(o.*field); }};
}

Flag real_flag(std::string name, std::string help, double TrainOptions::*field, bool allow_zero) {
  return {name, "X", std::move(help),
          [name, field, allow_zero](TrainOptions& o, const std::string& v) {
            o.*field = parse_positive(name, v, allow_zero);
          },
          [field](const TrainOptions& o) { return cli::show_number(o.*field); }};
}

using cli::text_flag;

const std::vector<Flag>& flags() {
  static const std::vector<Flag> table = {
      {"--device", "DEV", "auto, cpu or cuda (cuda: every stage on its own stream of the GPU)",
       [](TrainOptions& o, const std::string& v) { o.device = cli::parse_device("--device", v); },
       [](const TrainOptions& o) { return cli::device_choice_name(o.device); }},
      {"--precision", "P", "auto, f32 or bf16: the compute dtype; weights stay f32 (auto: bf16 on cuda, else f32)",
       [](TrainOptions& o, const std::string& v) { o.precision = cli::parse_precision("--precision", v); },
       [](const TrainOptions& o) { return cli::precision_choice_name(o.precision); }},
      {"--matmul", "GEMM",
       cli::matmul_choices() + ": the GEMM behind GPU matmuls (tuned: measured once per shape on this GPU, bits "
                          "may differ between runs; ignored on the CPU)",
       [](TrainOptions& o, const std::string& v) { o.matmul = cli::matmul_backend_of(v); },
       [](const TrainOptions& o) { return cli::matmul_choice_name(o.matmul); }},
      int_flag("--steps", "optimizer steps in the whole run (the schedule's length)", &TrainOptions::steps, 1),
      {"--seed", "S", "seed of the weights and of the data stream",
       [](TrainOptions& o, const std::string& v) { o.seed = uint64_t(parse_int("--seed", v, 0)); },
       [](const TrainOptions& o) { return std::to_string(o.seed); }},
      {"--threads", "N", "CPU worker threads (0: all cores, or BRIGADE_NUM_THREADS)",
       [](TrainOptions& o, const std::string& v) { o.threads = int(parse_int("--threads", v, 0)); },
       [](const TrainOptions& o) { return std::to_string(o.threads); }},
      int_flag("--batch", "sequences per step", &TrainOptions::batch, 1),
      real_flag("--lr", "peak learning rate (cosine decay to lr/10)", &TrainOptions::lr, false),
      int_flag("--warmup", "linear warm-up steps", &TrainOptions::warmup, 0),
      real_flag("--weight-decay", "AdamW decoupled weight decay", &TrainOptions::weight_decay, true),
      real_flag("--clip", "max global gradient norm (0: no clipping)", &TrainOptions::clip, true),
      int_flag("--layers", "transformer blocks", &TrainOptions::layers, 1),
      int_flag("--heads", "attention heads (must divide --embd)", &TrainOptions::heads, 1),
      int_flag("--embd", "embedding width", &TrainOptions::embd, 1),
      {"--arch", "NAME", "gpt2 or llama: the decoder's family (llama: RMSNorm, rotary positions, SwiGLU, "
                         "grouped-query attention, no biases)",
       [](TrainOptions& o, const std::string& v) { o.decoder.arch = cli::parse_arch("--arch", v); },
       [](const TrainOptions& o) { return std::string(nn::arch_name(o.decoder.arch)); }},
      {"--kv-heads", "N", "llama: key/value heads, dividing --heads (1: multi-query)",
       [](TrainOptions& o, const std::string& v) { o.decoder.kv_heads = parse_int("--kv-heads", v, 1); },
       [](const TrainOptions& o) { return o.decoder.kv_heads == 0 ? std::string("as many as --heads") : std::to_string(o.decoder.kv_heads); }},
      {"--mlp-hidden", "N", "the MLP's hidden width",
       [](TrainOptions& o, const std::string& v) { o.decoder.mlp_hidden = parse_int("--mlp-hidden", v, 1); },
       [](const TrainOptions& o) {
         return o.decoder.mlp_hidden == 0 ? std::string("4 x --embd; llama: 8/3 x --embd up to a multiple of 256")
                                          : std::to_string(o.decoder.mlp_hidden);
       }},
      {"--rope-theta", "X", "llama: the rotary positions' base",
       [](TrainOptions& o, const std::string& v) { o.decoder.rope.theta = parse_positive("--rope-theta", v, false); },
       [](const TrainOptions& o) { return cli::show_number(o.decoder.rope.theta); }},
      {"--untied", "", "llama: an output head of its own (lm_head) instead of the token embedding's",
       [](TrainOptions& o, const std::string&) { o.decoder.untied = true; },
       [](const TrainOptions& o) { return o.decoder.untied ? std::string("untied") : std::string("tied"); }},
      int_flag("--digits", "digits per sequence to sort (sequence length 2*digits)", &TrainOptions::digits, 1),
      {"--model", "NAME", "a model size: " + nn::gpt_preset_names() + "; sets layers, heads, embd, context (and a llama's family flags)",
       [](TrainOptions& o, const std::string& v) { o.model = v; },  // applied before the other flags: parse_train_args
       [](const TrainOptions& o) { return o.model.empty() ? std::string("none") : o.model; }},
      text_flag("--data", "DIR", "train a language model on DIR's token shards (brigade data prepare) instead of sorting",
                &TrainOptions::data),
      int_flag("--context", "tokens per training window with --data (the model's block size)", &TrainOptions::context, 1),
      int_flag("--vocab", "vocabulary size with --data (0: the tokenizer's in DIR, else GPT-2's 50257)",
               &TrainOptions::vocab, 0),
      text_flag("--init-from", "PATH", "start from the weights (step 0) of a checkpoint the model flags describe, or of a Hugging Face GPT-2 or "
                "LLaMA model (its directory, a model.safetensors, or a model.safetensors.index.json), whose config.json "
                "gives the model: family, sizes, epsilon, rope, tie, biases, vocabulary, context (a shorter --context is "
                "allowed; other model flags must agree with it)",
                &TrainOptions::init_from),
      int_flag("--stages", "pipeline stages (ranks); 0: no pipeline, one device", &TrainOptions::stages, 0),
      {"--partition", "BY",
       "split layers into stages by: layers (count), params, time (measured once), balanced (measured time "
       "and memory, blocks cut in halves, within --memory-budget), or auto (balanced where the stages run at "
       "once: GPUs, or a core per rank thread; else params)",
       [](TrainOptions& o, const std::string& v) {
         o.partition = pipeline::parse_partition_method(v);
         if (!o.partition && v != "auto") bad_flag("--partition", "expected auto, layers, params, time or balanced, got '" + v + "'");
       },
       [](const TrainOptions& o) { return partition_name(o.partition); }},
      {"--memory-budget", "SIZE", "with --partition balanced: the most a rank may hold, e.g. 512MiB (none: no limit)",
       [](TrainOptions& o, const std::string& v) { o.memory_budget = v == "none" ? 0 : cli::parse_bytes("--memory-budget", v); },
       [](const TrainOptions& o) {
         return o.memory_budget == 0 ? std::string("none") : format_bytes(double(o.memory_budget));
       }},
      {"--memory-limit", "SIZE",
       "GPU only: the most this process may reserve on its GPU, cached blocks included, e.g. 2GiB, or a fraction "
       "of the GPU such as 0.25; past it the run fails with what each part of it holds (ranks that are threads "
       "of one process share one limit; under brigade launch each process has its own; none: no limit)",
       [](TrainOptions& o, const std::string& v) {
         if (v == "none") {
           o.memory_limit = {};
           return;
         }
         try {
           o.memory_limit = parse_memory_limit("--memory-limit", v);
         } catch (const Error& e) {
           throw UsageError(e.what());
         }
       },
       [](const TrainOptions& o) { return o.memory_limit.str(); }},
      {"--schedule", "NAME", pipeline::schedule_names(),
       [](TrainOptions& o, const std::string& v) { o.schedule = cli::parse_schedule("--schedule", v); },
       [](const TrainOptions& o) { return std::string(pipeline::schedule_name(o.schedule)); }},
      text_flag("--schedule-file", "FILE",
                "run this schedule (PyTorch's CSV format) instead of --schedule; it gives --stages, --microbatches "
                "and --chunks",
                &TrainOptions::schedule_file),
      {"--microbatches", "M",
       "micro-batches per step (must divide --batch). With --stages 0 the step adds up their gradients as a "
       "pipeline does (less memory: one micro-batch's activations at a time)",
       [](TrainOptions& o, const std::string& v) { o.microbatches = parse_int("--microbatches", v, 1); },
       [](const TrainOptions& o) {
         return std::to_string(o.microbatches) + "; with --stages 0, 1: the whole batch at once";
       }},
      {"--chunks", "N", "model chunks per rank (interleaved: 2 or more; zb-v, dualpipev: 2)",
       [](TrainOptions& o, const std::string& v) { o.chunks = parse_int("--chunks", v, 1, 64); },
       [](const TrainOptions&) { return std::string("2 for interleaved, zb-v and dualpipev, else 1"); }},
      int_flag("--replicas", "data-parallel pipelines (threads; under launch: world size / stages)",
               &TrainOptions::replicas, 1),
      {"--recompute", "", "recompute each stage's forward in its backward (less memory)",
       [](TrainOptions& o, const std::string&) { o.recompute = true; },
       [](const TrainOptions& o) { return o.recompute ? std::string("on") : std::string("off"); }},
      text_flag("--trace", "PATH", "Chrome trace (Perfetto) of the last step; 'none': off", &TrainOptions::trace),
      text_flag("--svg", "PATH", "timeline of the last step, simulated vs measured; 'none': off", &TrainOptions::svg),
      text_flag("--metrics", "FILE",
                "append one JSON line per progress line and per validation (loss, lr, tok/s, MFU, peak memory per "
                "rank, time), flushed as written; a resumed run continues it",
                &TrainOptions::metrics),
      text_flag("--curves", "PATH", "with --metrics: the loss curves (SVG) drawn at the end; 'none': off",
                &TrainOptions::curves),
      int_flag("--log-every", "steps between progress lines", &TrainOptions::log_every, 1),
      int_flag("--eval", "held-out sequences for the final accuracy (--data: validation windows)",
               &TrainOptions::eval_examples, 1),
      int_flag("--eval-every", "validation loss every N steps with --data (0: every 5 progress lines)",
               &TrainOptions::eval_every, 0),
      text_flag("--save", "PATH", "write a checkpoint here at the end; or into a directory: see below",
                &TrainOptions::save),
      int_flag("--save-every", "also checkpoint every N steps (needs --save; 0: off)", &TrainOptions::save_every, 0),
      int_flag("--keep", "checkpoints a --save directory keeps, the newest", &TrainOptions::keep, 1),
      text_flag("--resume", "PATH", "continue from a checkpoint of the same configuration", &TrainOptions::resume),
  };
  return table;
}

// --schedule-file: the file's schedule is checked to run (every dependency, no deadlock) and sets
// the pipeline's shape; flags that would set it too are refused.
void take_schedule_file(const std::vector<std::string>& args, TrainOptions& o) {
  for (const char* shape : {"--schedule", "--stages", "--microbatches", "--chunks"})
    if (cli::flag_given(args, shape))
      bad_flag("--schedule-file", std::string("the file gives the schedule, its stages, micro-batches and chunks; drop ") +
                                      shape);
  pipeline::Schedule schedule;
  try {
    schedule = pipeline::schedule_from_file(pipeline::read_schedule_csv(o.schedule_file));
  } catch (const Error& e) {
    bad_flag("--schedule-file", e.what());
  }
  o.stages = schedule.ranks();
  o.microbatches = schedule.microbatches;
  o.chunks = schedule.chunks();
}

// Checks that involve more than one flag.
void check_combination(const TrainOptions& o) {
  const std::string matmul = cli::matmul_choice_name(o.matmul);
  if (o.precision == DType::f32 && (o.matmul == ops::MatmulBackend::tensor_core || o.matmul == ops::MatmulBackend::hopper))
    bad_flag("--matmul", matmul + " has kernels for bf16 and f16 only, and --precision f32 computes in f32; use "
                         "automatic, cublas, tuned or tiled, or --precision bf16");
  // The device the run will use, unchecked: a --device that names no usable GPU is reported by the
  // run itself, with its own message (cli::usable_device), so the checks below pass it by.
  const Device device = cli::device_or_default(o.device);
  const bool gpu_here = device.is_cuda() && cuda_available();
  // A GPU that cannot run the backend is a usage error too, found before anything runs.
  if (o.matmul == ops::MatmulBackend::hopper && gpu_here && !ops::matmul_backend_available(o.matmul, device))
    bad_flag("--matmul", matmul + ": " + device.str() + " cannot run it (hopper needs an sm_90 GPU and a build for "
                                                        "gpu_arch 90)");
  if (o.embd % o.heads != 0) {
    throw UsageError("--heads: " + std::to_string(o.heads) + " heads do not divide --embd " + std::to_string(o.embd));
  }
  cli::check_decoder_flags(o.decoder, o.heads, o.embd);
  if (o.digits > 64) bad_flag("--digits", "at most 64 (sequences of 128 tokens), got " + std::to_string(o.digits));
  if (o.data.empty()) {
    if (!o.model.empty()) bad_flag("--model", "model sizes are for language modelling: add --data DIR");
    if (o.vocab != 0) bad_flag("--vocab", "only with --data (the sort task has its own 11 tokens)");
  }
  if (o.save_every > 0 && o.save.empty()) bad_flag("--save-every", "needs --save PATH");
  if (!o.memory_limit.none() && device.is_cpu())
    bad_flag("--memory-limit", "limits GPU memory, and this run is on the CPU (--device " + cli::device_choice_name(o.device) +
                                   "); for the split of a CPU pipeline use --memory-budget");
  if (o.memory_budget > 0 && o.stages == 0)
    bad_flag("--memory-budget", "is for splitting a pipeline's stages: add --stages P (one device holds everything)");
  if (o.memory_budget > 0 && o.partition && *o.partition != pipeline::PartitionMethod::balanced)
    bad_flag("--memory-budget", "only --partition balanced weighs memory (got --partition " + partition_name(o.partition) + ")");
  if (o.stages == 0 && o.batch % o.microbatches != 0)
    bad_flag("--microbatches", "a batch of " + std::to_string(o.batch) + " sequences does not split into " +
                                   std::to_string(o.microbatches) + " equal micro-batches; make --batch a multiple of "
                                   "--microbatches");
  if (o.stages > 0) {
    const int64_t per_replica = o.batch / o.replicas;
    if (o.batch % o.replicas != 0 || per_replica % o.microbatches != 0)
      bad_flag("--microbatches", "a batch of " + std::to_string(o.batch) + " sequences does not split into " +
                                     std::to_string(o.replicas) + " replica(s) x " + std::to_string(o.microbatches) +
                                     " equal micro-batches; make --batch a multiple of --replicas x --microbatches");
    if (!o.schedule_file.empty()) return;  // the file's own shape, checked when it was read
    const int64_t V = o.chunks_or_default();
    const pipeline::ScheduleKind kind = o.schedule;
    if (kind == pipeline::ScheduleKind::interleaved && V < 2) bad_flag("--chunks", "interleaved needs at least 2 chunks per rank");
    if (pipeline::placement_of(kind) == pipeline::Placement::v_shape && V != 2)
      bad_flag("--chunks", std::string(pipeline::schedule_name(kind)) + " holds exactly 2 chunks per rank (its V)");
    if (kind != pipeline::ScheduleKind::interleaved && pipeline::default_chunks(kind) == 1 && V != 1)
      bad_flag("--chunks", "only the interleaved, zb-v and dualpipev schedules hold more than one chunk per rank");
  }
}

}  // namespace

int64_t TrainOptions::chunks_or_default() const {
  return chunks > 0 ? chunks : pipeline::default_chunks(schedule);
}

std::string partition_name(const std::optional<pipeline::PartitionMethod>& method) {
  return method ? pipeline::partition_method_name(*method) : "auto";
}

ParsedTrainArgs parse_train_args(const std::vector<std::string>& args) {
  ParsedTrainArgs out;
  // A preset first, so that --layers and friends override it wherever they stand on the line.
  for (size_t i = 0; i < args.size(); ++i) {
    std::string name;
    if (args[i] == "--model" && i + 1 < args.size()) name = args[i + 1];
    else if (args[i].rfind("--model=", 0) == 0) name = args[i].substr(8);
    else continue;
    const nn::GPTPreset* preset = nn::find_gpt_preset(name);
    if (!preset) bad_flag("--model", "expected " + nn::gpt_preset_names() + ", got '" + name + "'");
    out.options.layers = preset->n_layer;
    out.options.heads = preset->n_head;
    out.options.embd = preset->n_embd;
    out.options.context = preset->block_size;
    out.options.decoder = {.arch = preset->arch,
                           .kv_heads = preset->n_kv_head,
                           .mlp_hidden = preset->mlp_hidden,
                           .rope = preset->rope,
                           .untied = !preset->tie_embeddings};
  }
  cli::parse_flags(args, flags(), out.options, out.help);
  if (!out.options.schedule_file.empty()) take_schedule_file(args, out.options);
  take_init_from_model(args, out.options);
  // One device runs the whole batch at once unless micro-batches are asked for: the old `--stages 0`
  // behaviour, and the fastest when the batch fits (one large GEMM beats M small ones).
  if (out.options.stages == 0 && !cli::flag_given(args, "--microbatches")) out.options.microbatches = 1;
  check_combination(out.options);
  return out;
}

std::string train_usage() {
  std::ostringstream os;
  os << "usage: brigade train [flags]\n\n"
        "Trains a small GPT (brigade::nn::GPT; --arch llama: a LLaMA-style one) to sort digits, e.g. '3 1 4 1 | 1 1 3 4', on data\n"
        "generated on the fly, then reports its held-out accuracy. With --data DIR it trains a language\n"
        "model on DIR's token shards instead (brigade tokenizer train, then brigade data prepare), reporting\n"
        "validation loss and MFU.\n\nflags:\n";
  os << cli::flag_lines(flags());
  os << "\n"
        "checkpoint directories: when --save names a directory (one that exists, or a path ending in '/',\n"
        "created if its parent exists), each save writes the directory DIR/step-<8 digits>, then deletes all\n"
        "but the --keep newest. The same command started again resumes from the newest checkpoint that\n"
        "loads: a damaged one is skipped with a warning, the temporary file of an interrupted save is never\n"
        "used, and one of another configuration is an error, as with --resume. With none it starts at step\n"
        "0; an explicit --resume wins. Under `brigade launch`, rank 0 picks the checkpoint and every rank\n"
        "loads that file: DIR must be one shared directory, at the same path on every host.\n";
  return os.str();
}

}  // namespace brigade::train
