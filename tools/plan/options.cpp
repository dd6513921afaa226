#include "options.h"

#include <sstream>

#include "core/error.h"
#include "core/format.h"
#include "nn/gpt.h"
#include "nn/gpt_presets.h"
#include "tools/cli/precision_choice.h"

namespace brigade::plan_cli {

namespace {

using cli::parse_int;
using cli::parse_number;
using Flag = cli::Flag<PlanOptions>;

using cli::bad_flag;

Flag size_flag(std::string name, std::string help, int64_t pipeline::GptShape::*field) {
  return {name, "N", std::move(help),
          [name, field](PlanOptions& o, const std::string& v) {
            o.shape.*field = parse_int(name, v, 1, int64_t(1) << 24);
            if (field == &pipeline::GptShape::vocab) o.vocab_given = true;
          },
          [field](const PlanOptions& o) { return std::to_string(o.shape.*field) + " (gpt2)"; }};
}

std::vector<pipeline::ScheduleKind> parse_schedules(const std::string& text) {
  if (text == "all") return pipeline::all_schedule_kinds();
  std::vector<pipeline::ScheduleKind> out;
  std::stringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    try {
      out.push_back(pipeline::parse_schedule_kind(item));
    } catch (const Error&) {
      bad_flag("--schedules", "expected a comma-separated list of " + pipeline::schedule_names() + " (or all), got '" +
                                  item + "'");
    }
  }
  if (out.empty()) bad_flag("--schedules", "expected at least one schedule");
  return out;
}

const std::vector<Flag>& flags() {
  static const std::vector<Flag> table = {
      {"--model", "NAME", "a model size: " + nn::gpt_preset_names() + " (a llama's family comes with it); --layers and "
                          "friends override it",
       [](PlanOptions& o, const std::string& v) { o.model = v; },  // applied before the other flags
       [](const PlanOptions& o) { return o.model; }},
      size_flag("--layers", "transformer blocks", &pipeline::GptShape::layers),
      size_flag("--heads", "attention heads (must divide --embd)", &pipeline::GptShape::heads),
      size_flag("--embd", "embedding width", &pipeline::GptShape::embd),
      size_flag("--context", "tokens per sequence", &pipeline::GptShape::context),
      size_flag("--vocab", "vocabulary size (GPT-2's unless given; then also passed to brigade train)",
                &pipeline::GptShape::vocab),
      {"--devices", "N", "devices (GPUs) in all: P pipeline stages x D data-parallel replicas",
       [](PlanOptions& o, const std::string& v) { o.devices = int(parse_int("--devices", v, 1, 4096)); },
       [](const PlanOptions& o) { return std::to_string(o.devices); }},
      {"--memory", "SIZE", "memory of one device, e.g. 80GiB, 24GiB, 40GB",
       [](PlanOptions& o, const std::string& v) {
         o.memory = cli::parse_bytes("--memory", v);
         o.memory_text = v;
       },
       [](const PlanOptions& o) { return format_bytes(double(o.memory)); }},
      {"--tflops", "X", "effective TFLOP/s of one device: what a training step reaches, not its peak",
       [](PlanOptions& o, const std::string& v) {
         o.tflops = parse_number("--tflops", v, 0);
         if (o.tflops == 0) bad_flag("--tflops", "must be positive, got " + v);
       },
       [](const PlanOptions&) { return std::string("240 with bf16, 22 with f32: brigade's GPT-2 step on an H200"); }},
      {"--bandwidth", "GB/s", "bandwidth between two devices, each way (PCIe 5.0 x16: about 50)",
       [](PlanOptions& o, const std::string& v) {
         o.bandwidth = parse_number("--bandwidth", v, 0);
         if (o.bandwidth == 0) bad_flag("--bandwidth", "must be positive, got " + v);
       },
       [](const PlanOptions& o) { return cli::show_number(o.bandwidth) + ": NVLink"; }},
      {"--latency", "US", "microseconds per message, on top of its bytes",
       [](PlanOptions& o, const std::string& v) { o.latency = parse_number("--latency", v, 0); },
       [](const PlanOptions& o) { return cli::show_number(o.latency); }},
      {"--batch", "N", "sequences per step, over all replicas",
       [](PlanOptions& o, const std::string& v) { o.batch = parse_int("--batch", v, 1, int64_t(1) << 24); },
       [](const PlanOptions& o) { return std::to_string(o.batch); }},
      {"--precision", "P", "bf16 or f32: the activations' dtype (weights and optimizer state are f32)",
       [](PlanOptions& o, const std::string& v) { o.precision = *cli::parse_precision("--precision", v, false); },
       [](const PlanOptions& o) { return std::string(dtype_name(o.precision)); }},
      {"--schedules", "LIST", "the schedules to try, comma-separated (" + pipeline::schedule_names() + ")",
       [](PlanOptions& o, const std::string& v) { o.schedules = parse_schedules(v); },
       [](const PlanOptions&) { return std::string("all"); }},
      {"--max-chunks", "V", "interleaved: try 2 to V chunks per rank",
       [](PlanOptions& o, const std::string& v) { o.max_chunks = int(parse_int("--max-chunks", v, 2, 64)); },
       [](const PlanOptions& o) { return std::to_string(o.max_chunks); }},
      {"--recompute", "WHEN", "on, off or both: whether to try activation recomputation",
       [](PlanOptions& o, const std::string& v) {
         if (v != "on" && v != "off" && v != "both") bad_flag("--recompute", "expected on, off or both, got '" + v + "'");
         o.recompute = v;
       },
       [](const PlanOptions& o) { return o.recompute; }},
      {"--top", "K", "how many configurations to print",
       [](PlanOptions& o, const std::string& v) { o.top = int(parse_int("--top", v, 1, 1000)); },
       [](const PlanOptions& o) { return std::to_string(o.top); }},
      {"--data", "DIR", "the token shards the printed brigade train lines train on",
       [](PlanOptions& o, const std::string& v) {
         if (v.empty()) bad_flag("--data", "expected a directory");
         o.data = v;
       },
       [](const PlanOptions& o) { return o.data; }},
  };
  return table;
}

}  // namespace

pipeline::GptShape preset_shape(const std::string& model) {
  if (const nn::GPTPreset* p = nn::find_gpt_preset(model)) {
    nn::GPTConfig config;
    nn::apply_preset(*p, config);
    return pipeline::gpt_shape(config);
  }
  bad_flag("--model", "expected " + nn::gpt_preset_names() + ", got '" + model + "'");
}

double PlanOptions::tflops_or_default() const { return tflops > 0 ? tflops : precision == DType::f32 ? 22 : 240; }

pipeline::PlanSpec PlanOptions::spec() const {
  pipeline::PlanSpec s;
  s.model = shape;
  s.compute = precision;
  s.batch = batch;
  s.hardware.devices = devices;
  s.hardware.memory = memory;
  s.hardware.flops = tflops_or_default() * 1e12;
  s.hardware.bandwidth = bandwidth * 1e9;
  s.hardware.latency = latency * 1e-6;
  s.schedules = schedules;
  s.max_chunks = max_chunks;
  s.recompute = recompute == "both" ? std::vector<bool>{false, true} : std::vector<bool>{recompute == "on"};
  return s;
}

ParsedPlanArgs parse_plan_args(const std::vector<std::string>& args) {
  ParsedPlanArgs out;
  PlanOptions& o = out.options;
  // The preset first, so that --layers and friends override it wherever they stand on the line.
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--model" && i + 1 < args.size()) o.model = args[i + 1];
    else if (args[i].rfind("--model=", 0) == 0) o.model = args[i].substr(8);
  }
  o.shape = preset_shape(o.model);
  cli::parse_flags(args, flags(), o, out.help);
  if (o.shape.embd % o.shape.heads != 0)
    bad_flag("--heads", std::to_string(o.shape.heads) + " heads do not divide --embd " + std::to_string(o.shape.embd));
  // `brigade train --data` pads the vocabulary to a multiple of 128 (tools/train/text_task.cpp): the
  // model it builds, and so the one planned, has that many rows in the embedding and the head.
  o.vocab_unpadded = o.shape.vocab;
  o.shape.vocab = (o.shape.vocab + 127) / 128 * 128;
  if (pipeline::plan_candidates(o.spec()).empty())
    bad_flag("--batch", "no configuration of " + std::to_string(o.devices) + " devices runs a batch of " +
                            std::to_string(o.batch) + " sequences with these schedules (D replicas must divide it, and M " +
                            "micro-batches each replica's share: interleaved a multiple of P, zb-v and dualpipev at " +
                            "least 2P); try a multiple of --devices");
  return out;
}

std::string plan_usage() {
  return cli::usage_text(
      "usage: brigade plan [flags]\n\n"
      "Finds how to train a GPT on N devices: P pipeline stages x D data-parallel replicas, the schedule,\n"
      "its chunks V and micro-batches M, and recomputation. Each configuration's layers are split to fit\n"
      "the device's memory, its peak per rank predicted and its step simulated, from an analytic cost\n"
      "model of the GPT and the devices' speeds; the best are printed with the command that runs each.\n\n"
      "example: brigade plan --model gpt2-xl --devices 16 --memory 40GiB --bandwidth 50\n\nflags:\n",
      flags());
}

}  // namespace brigade::plan_cli
