// Settings of `brigade tokenizer train|encode|decode` and the parser of its command line.
//
// Each action has one flag table (options.cpp) that both parses and prints its --help, as in the
// other commands (tools/cli/flags.h); what is not a flag is an operand: the corpus files of train,
// the text of encode, the ids of decode.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tools/cli/flags.h"

namespace brigade::tokenizer_cli {

struct TokenizerOptions {
  std::string action;  // train, encode or decode
  // train
  int64_t vocab = 0;           // --vocab: tokens in the trained vocabulary (required)
  int64_t min_frequency = 2;   // --min-frequency: rarer pairs are never merged
  std::string out;             // --out: the directory that gets vocab.json and merges.txt (required)
  // encode and decode
  std::string tokenizer;       // --tokenizer: a directory with vocab.json and merges.txt (required)
  std::string file;            // encode --file: encode this file's bytes instead of TEXT
  bool special = false;        // encode --special: "<|endoftext|>" in the text is the token, not text
  std::vector<std::string> operands;  // train: the corpus files; encode: TEXT; decode: the ids
};

using UsageError = cli::UsageError;

// help: --help / -h was given (print the usage of the action, when one was named)
using ParsedTokenizerArgs = cli::Parsed<TokenizerOptions>;

// Parses the arguments after `brigade tokenizer`: the action, then its flags and operands.
ParsedTokenizerArgs parse_tokenizer_args(const std::vector<std::string>& args);

// The --help text of `action` ("train", "encode", "decode"), or of the command as a whole for "".
std::string tokenizer_usage(const std::string& action = "");

}  // namespace brigade::tokenizer_cli
