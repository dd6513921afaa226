#include "tokenizer/options.h"

#include <iomanip>
#include <sstream>

namespace brigade::tokenizer_cli {

namespace {

using Flag = cli::Flag<TokenizerOptions>;

using cli::text_flag;

// A flag without which the action cannot run: its --help says so instead of showing a default.
Flag required(Flag flag) {
  flag.get = [](const TokenizerOptions&) { return std::string("required"); };
  return flag;
}

const Flag kTokenizerFlag = required(
    text_flag("--tokenizer", "DIR", "the tokenizer: DIR/tokenizer.json, or DIR/vocab.json and DIR/merges.txt",
              &TokenizerOptions::tokenizer));

const std::vector<Flag>& train_flags() {
  static const std::vector<Flag> table = {
      required({"--vocab", "N", "tokens in the vocabulary: 256 bytes + merges + <|endoftext|> (at least 257)",
                [](TokenizerOptions& o, const std::string& v) { o.vocab = cli::parse_int("--vocab", v, 257); },
                nullptr}),
      {"--min-frequency", "N", "never merge a pair seen fewer times (the vocabulary may come out smaller)",
       [](TokenizerOptions& o, const std::string& v) { o.min_frequency = cli::parse_int("--min-frequency", v, 1); },
       [](const TokenizerOptions& o) { return std::to_string(o.min_frequency); }},
      required(text_flag("--out", "DIR", "write DIR/vocab.json and DIR/merges.txt (DIR is created)",
                         &TokenizerOptions::out)),
  };
  return table;
}

const std::vector<Flag>& encode_flags() {
  static const std::vector<Flag> table = {
      kTokenizerFlag,
      text_flag("--file", "F", "encode the bytes of file F instead of TEXT", &TokenizerOptions::file),
      {"--special", "", "read special tokens in the text (<|endoftext|>, ...) as those tokens (else they are text, as in GPT-2)",
       [](TokenizerOptions& o, const std::string&) { o.special = true; },
       [](const TokenizerOptions& o) { return o.special ? std::string("on") : std::string("off"); }},
  };
  return table;
}

const std::vector<Flag>& decode_flags() {
  static const std::vector<Flag> table = {kTokenizerFlag};
  return table;
}

const std::vector<Flag>* flags_of(const std::string& action) {
  if (action == "train") return &train_flags();
  if (action == "encode") return &encode_flags();
  if (action == "decode") return &decode_flags();
  return nullptr;
}

// Checks that involve more than one flag, or the operands.
void check(const TokenizerOptions& o) {
  if (o.action == "train") {
    if (o.vocab == 0) throw UsageError("--vocab: required (the number of tokens to train)");
    if (o.out.empty()) throw UsageError("--out: required (the directory to write the tokenizer to)");
    if (o.operands.empty()) throw UsageError("no corpus: name one or more text files to train on");
    return;
  }
  if (o.tokenizer.empty()) throw UsageError("--tokenizer: required (a directory with tokenizer.json, or vocab.json and merges.txt)");
  if (o.action == "encode") {
    if (!o.file.empty() && !o.operands.empty()) throw UsageError("give TEXT or --file, not both");
    if (o.file.empty() && o.operands.empty()) throw UsageError("nothing to encode: give TEXT or --file F");
    if (o.operands.size() > 1)
      throw UsageError("one TEXT only, got " + std::to_string(o.operands.size()) + " (quote a text with spaces)");
  }
  if (o.action == "decode" && o.operands.empty()) throw UsageError("no ids to decode");
}

}  // namespace

ParsedTokenizerArgs parse_tokenizer_args(const std::vector<std::string>& args) {
  ParsedTokenizerArgs out;
  if (args.empty()) throw UsageError("expected an action: train, encode or decode");
  out.help = cli::is_help(args[0]);  // the command's usage, not an action's
  if (out.help) return out;
  out.options.action = args[0];
  const std::vector<Flag>* flags = flags_of(args[0]);
  if (!flags) throw UsageError("unknown action '" + args[0] + "' (expected train, encode or decode)");
  cli::parse_flags(std::vector<std::string>(args.begin() + 1, args.end()), *flags, out.options, out.help,
                   &out.options.operands);
  if (!out.help) check(out.options);
  return out;
}

std::string tokenizer_usage(const std::string& action) {
  std::ostringstream os;
  const std::vector<Flag>* flags = flags_of(action);
  if (!flags) {
    os << "usage: brigade tokenizer <action> [flags]\n\n"
          "GPT-2's byte-level BPE tokenizer (text/): train one on text files, or use one — yours or GPT-2's\n"
          "own files — to turn text into token ids and back.\n\nactions:\n"
          "  train   --vocab N --out DIR FILES...          learn a vocabulary and merges from FILES\n"
          "  encode  --tokenizer DIR [TEXT | --file F]     print the token ids of TEXT (or of F's bytes)\n"
          "  decode  --tokenizer DIR IDS...                print the bytes the ids stand for\n\n"
          "Run 'brigade tokenizer <action> --help' for an action's flags.\n";
    return os.str();
  }
  if (action == "train") {
    os << "usage: brigade tokenizer train --vocab N --out DIR [flags] FILES...\n\n"
          "Trains a byte-level BPE on the text of FILES: ids 0-255 the bytes (in GPT-2's order), then one\n"
          "token per merge, most frequent pair first, then <|endoftext|>. Writes DIR/vocab.json and\n"
          "DIR/merges.txt (GPT-2's formats), and prints how well the vocabulary compresses the corpus.\n"
          "<|endoftext|> in a file separates documents.\n\nflags:\n";
  } else if (action == "encode") {
    os << "usage: brigade tokenizer encode --tokenizer DIR [--special] (TEXT | --file F)\n\n"
          "Prints the token ids of TEXT, or of the bytes of file F, on one line separated by spaces.\n"
          "DIR holds a Hugging Face tokenizer.json, or vocab.json and merges.txt, or GPT-2's own\n"
          "encoder.json and vocab.bpe.\n\nflags:\n";
  } else {
    os << "usage: brigade tokenizer decode --tokenizer DIR IDS...\n\n"
          "Writes the bytes the token ids stand for to standard output, exactly: nothing is added, not\n"
          "even a newline. IDS are whole numbers, as separate arguments or separated by spaces or commas\n"
          "in one ('15496 995', '15496,995').\n\nflags:\n";
  }
  os << cli::flag_lines(*flags);
  return os.str();
}

}  // namespace brigade::tokenizer_cli
