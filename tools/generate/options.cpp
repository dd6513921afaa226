#include "generate/options.h"

#include <sstream>

#include "core/json.h"  // json_number: the shortest text of a number

namespace brigade::generate_cli {

namespace {

using Flag = cli::Flag<GenerateOptions>;

using cli::text_flag;

// "1 2 3": whole numbers >= 0 separated by spaces, at least one (the vocabulary's bound is the
// model's, checked once it is read).
std::vector<int64_t> parse_ids(const std::string& flag, const std::string& text) {
  std::vector<int64_t> ids;
  std::istringstream words(text);
  for (std::string word; words >> word;) ids.push_back(cli::parse_int(flag, word, 0));
  if (ids.empty()) throw UsageError(flag + ": no token ids in '" + text + "'");
  return ids;
}

const std::vector<Flag>& flags() {
  static const std::vector<Flag> table = {
      text_flag("--checkpoint", "PATH", "a `brigade train --data` checkpoint, or a Hugging Face GPT-2 or LLaMA model: its directory (config.json and model.safetensors, or shards and model.safetensors.index.json), a model.safetensors",
                &GenerateOptions::checkpoint, "required"),
      text_flag("--tokenizer", "DIR", "tokenizer.json, or vocab.json + merges.txt (else the checkpoint's own, or the one beside a Hugging Face model)",
                &GenerateOptions::tokenizer, "the checkpoint's"),
      text_flag("--prompt", "TEXT", "the text to continue (empty: a new document, <|endoftext|>)",
                &GenerateOptions::prompt, "empty"),
      {"--prompt-ids", "\"I I ...\"", "the prompt as token ids, separated by spaces, instead of --prompt's text",
       [](GenerateOptions& o, const std::string& v) { o.prompt_ids = parse_ids("--prompt-ids", v); },
       [](const GenerateOptions&) { return std::string("none"); }},
      {"--ids", "", "print the generated token ids (one line per sample) instead of their text",
       [](GenerateOptions& o, const std::string&) { o.print_ids = true; },
       [](const GenerateOptions&) { return std::string("off"); }},
      {"--tokens", "N", "new tokens to generate",
       [](GenerateOptions& o, const std::string& v) { o.tokens = cli::parse_int("--tokens", v, 1); },
       [](const GenerateOptions& o) { return std::to_string(o.tokens); }},
      {"--temperature", "T", "sampling temperature (0: greedy, always the most likely token)",
       [](GenerateOptions& o, const std::string& v) { o.temperature = cli::parse_number("--temperature", v, 0); },
       [](const GenerateOptions& o) { return json_number(o.temperature); }},
      {"--top-k", "K", "sample among the K most likely tokens only (0: all)",
       [](GenerateOptions& o, const std::string& v) { o.top_k = cli::parse_int("--top-k", v, 0); },
       [](const GenerateOptions& o) { return std::to_string(o.top_k); }},
      {"--seed", "S", "seed of the sampling (the same seed, the same text)",
       [](GenerateOptions& o, const std::string& v) { o.seed = uint64_t(cli::parse_int("--seed", v, 0)); },
       [](const GenerateOptions& o) { return std::to_string(o.seed); }},
      {"--samples", "N", "independent continuations of the prompt",
       [](GenerateOptions& o, const std::string& v) { o.samples = cli::parse_int("--samples", v, 1, 64); },
       [](const GenerateOptions& o) { return std::to_string(o.samples); }},
      {"--device", "DEV", "auto, cpu or cuda",
       [](GenerateOptions& o, const std::string& v) { o.device = cli::parse_device("--device", v); },
       [](const GenerateOptions& o) { return cli::device_choice_name(o.device); }},
      {"--stages", "P", "decode across P pipeline stages, each rank building, reading and caching only its own "
       "layers (threads here; under `brigade launch -n P`, one process each); 0: one device",
       [](GenerateOptions& o, const std::string& v) { o.stages = cli::parse_int("--stages", v, 0); },
       [](const GenerateOptions& o) { return std::to_string(o.stages); }},
      {"--no-cache", "", "no KV cache: run the whole context for every token (the reference, slower)",
       [](GenerateOptions& o, const std::string&) { o.no_cache = true; },
       [](const GenerateOptions&) { return std::string("off"); }},
  };
  return table;
}

}  // namespace

ParsedGenerateArgs parse_generate_args(const std::vector<std::string>& args) {
  ParsedGenerateArgs out;
  cli::parse_flags(args, flags(), out.options, out.help);
  if (!out.help && out.options.checkpoint.empty()) throw UsageError("--checkpoint: required");
  if (!out.options.prompt_ids.empty() && cli::flag_given(args, "--prompt"))
    throw UsageError("--prompt and --prompt-ids: give the prompt one way");
  return out;
}

std::string generate_usage() {
  return cli::usage_text(
      "usage: brigade generate --checkpoint PATH [flags]\n\n"
      "Continues a prompt with a trained GPT, one token at a time, with a KV cache.\n\nflags:\n",
      flags());
}

}  // namespace brigade::generate_cli
