#include "command_line.h"

namespace brigade::plan_cli {

std::vector<std::string> train_arguments(const PlanOptions& o, const pipeline::Candidate& c) {
  std::vector<std::string> args = {"--data", o.data, "--model", o.model};
  // Sizes the preset does not have (--model sets them, flags after it override).
  const pipeline::GptShape preset = preset_shape(o.model);
  const std::pair<const char*, std::pair<int64_t, int64_t>> sizes[] = {{"--layers", {o.shape.layers, preset.layers}},
                                                                       {"--heads", {o.shape.heads, preset.heads}},
                                                                       {"--embd", {o.shape.embd, preset.embd}},
                                                                       {"--context", {o.shape.context, preset.context}}};
  for (const auto& [flag, values] : sizes)
    if (values.first != values.second) args.insert(args.end(), {flag, std::to_string(values.first)});
  if (o.vocab_given) args.insert(args.end(), {"--vocab", std::to_string(o.vocab_unpadded)});
  args.insert(args.end(), {"--batch", std::to_string(o.batch), "--precision", dtype_name(o.precision), "--stages",
                           std::to_string(c.stages), "--schedule", pipeline::schedule_name(c.schedule),
                           "--microbatches", std::to_string(c.microbatches)});
  if (c.chunks != pipeline::default_chunks(c.schedule)) args.insert(args.end(), {"--chunks", std::to_string(c.chunks)});
  if (c.recompute) args.push_back("--recompute");
  args.insert(args.end(), {"--partition", "balanced", "--memory-budget", o.memory_text});
  return args;
}

std::string run_command_line(const PlanOptions& o, const pipeline::Candidate& c) {
  const int devices = c.stages * c.replicas;
  std::string line = devices > 1 ? "brigade launch -n " + std::to_string(devices) + " -- brigade train" : "brigade train";
  for (const std::string& arg : train_arguments(o, c)) line += " " + arg;
  return line;
}

}  // namespace brigade::plan_cli
