// Settings of `brigade generate` and the parser of its command line (tools/cli/flags.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tools/cli/device_choice.h"
#include "tools/cli/flags.h"

namespace brigade::generate_cli {

struct GenerateOptions {
  std::string checkpoint;       // a `brigade train --data` checkpoint, or a Hugging Face model (nn/hf_model.h)
  std::string tokenizer;        // a tokenizer directory (needed for Hugging Face files; wins over the checkpoint's and the model directory's)
  std::string prompt;           // the text to continue ("": start a new document with <|endoftext|>)
  std::vector<int64_t> prompt_ids;  // the prompt as token ids instead of text (no tokenizer needed)
  bool print_ids = false;       // print the generated ids, not their text (no tokenizer needed)
  int64_t tokens = 100;         // new tokens
  double temperature = 0.8;     // 0: greedy
  int64_t top_k = 40;           // 0: all tokens
  uint64_t seed = 1;
  int64_t samples = 1;          // independent continuations, generated as one batch
  cli::DeviceChoice device;     // auto: the GPU when there is one
  bool no_cache = false;        // run the whole context for every token (slower; the reference)
  int64_t stages = 0;           // pipeline stages to decode across (0: the whole model on one device)
};

using UsageError = cli::UsageError;

using ParsedGenerateArgs = cli::Parsed<GenerateOptions>;

ParsedGenerateArgs parse_generate_args(const std::vector<std::string>& args);
std::string generate_usage();

}  // namespace brigade::generate_cli
