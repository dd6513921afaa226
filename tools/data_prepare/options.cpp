#include "data_prepare/options.h"


#include "core/json.h"  // json_number: the shortest text of a number

namespace brigade::data_cli {

namespace {

using Flag = cli::Flag<PrepareOptions>;

const std::vector<Flag>& flags() {
  static const std::vector<Flag> table = {
      cli::text_flag("--tokenizer", "DIR", "the tokenizer (tokenizer.json, or vocab.json + merges.txt: brigade tokenizer train, GPT-2's, a Hugging Face model's)",
                     &PrepareOptions::tokenizer, "required"),
      cli::text_flag("--out", "DIR", "where the shards go (created if missing)", &PrepareOptions::out, "required"),
      {"--val-fraction", "F", "the share of tokens held out for validation, in [0, 0.5]",
       [](PrepareOptions& o, const std::string& v) { o.val_fraction = cli::parse_number("--val-fraction", v, 0, 0.5); },
       [](const PrepareOptions& o) { return json_number(o.val_fraction); }},
      {"--shard-tokens", "N", "tokens per shard at most (a shard's header counts at most 2^31 - 1)",
       [](PrepareOptions& o, const std::string& v) { o.shard_tokens = cli::parse_int("--shard-tokens", v, 1, INT32_MAX); },
       [](const PrepareOptions& o) { return std::to_string(o.shard_tokens); }},
  };
  return table;
}

}  // namespace

ParsedPrepareArgs parse_data_args(const std::vector<std::string>& args) {
  ParsedPrepareArgs out;
  if (args.empty()) throw UsageError("expected an action: prepare");
  out.help = cli::is_help(args[0]);  // the command's usage, not an action's
  if (out.help) return out;
  if (args[0] != "prepare") throw UsageError("unknown action '" + args[0] + "' (expected prepare)");
  cli::parse_flags(std::vector<std::string>(args.begin() + 1, args.end()), flags(), out.options, out.help,
                   &out.options.files);
  if (out.help) return out;
  if (out.options.tokenizer.empty()) throw UsageError("--tokenizer: required (a directory with tokenizer.json, or vocab.json and merges.txt)");
  if (out.options.out.empty()) throw UsageError("--out: required (the directory for the shards)");
  if (out.options.files.empty()) throw UsageError("no corpus files given (brigade data prepare [flags] FILES...)");
  return out;
}

std::string data_usage() {
  return cli::usage_text(
      "usage: brigade data prepare --tokenizer DIR --out DIR [flags] FILES...\n\n"
      "Tokenizes the files (each one document, preceded by <|endoftext|>) and writes token shards in\n"
      "llm.c's format: OUT/train_000000.bin ... and OUT/val_000000.bin ..., plus a copy of the tokenizer\n"
      "in OUT/tokenizer/, so that `brigade train --data OUT` needs nothing else. Validation takes every\n"
      "k-th block of the token stream (k = 1 / fraction; blocks of 64 to 4096 tokens, smaller for a small\n"
      "corpus), so both splits sample the whole corpus. Shards named train_NNNNNN.bin or val_NNNNNN.bin\n"
      "that an earlier run left in OUT beyond the new ones are removed.\n\nflags:\n",
      flags());
}

}  // namespace brigade::data_cli
