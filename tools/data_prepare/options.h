// Settings of `brigade data prepare` and the parser of its command line (one flag table that parses
// and prints --help, tools/cli/flags.h; the corpus files are operands).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tools/cli/flags.h"

namespace brigade::data_cli {

struct PrepareOptions {
  std::string tokenizer;         // --tokenizer: a directory with vocab.json and merges.txt (required)
  std::string out;               // --out: the directory that gets the shards (required)
  double val_fraction = 0.1;     // --val-fraction: the share of tokens that goes to validation
  int64_t shard_tokens = 100'000'000;  // --shard-tokens: tokens per shard at most (llm.c's fineweb: 10^8)
  std::vector<std::string> files;      // the corpus: each file is one document
};

using UsageError = cli::UsageError;

using ParsedPrepareArgs = cli::Parsed<PrepareOptions>;

// Parses the arguments after `brigade data`: the action ("prepare"), then its flags and files.
ParsedPrepareArgs parse_data_args(const std::vector<std::string>& args);
std::string data_usage();

}  // namespace brigade::data_cli
