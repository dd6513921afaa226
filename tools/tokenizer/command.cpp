#include "tokenizer/command.h"

#include <chrono>
#include <exception>
#include <filesystem>
#include <limits>
#include <ostream>

#include "core/format.h"
#include "core/read_file.h"
#include "text/tokenizer_files.h"
#include "text/train.h"
#include "tokenizer/options.h"

namespace brigade::tokenizer_cli {

namespace {

using namespace brigade::text;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void train(const TokenizerOptions& o, std::ostream& out) {
  const auto start = std::chrono::steady_clock::now();
  WordCounts words;
  for (const std::string& path : o.operands) words.add_file(path);
  out << "corpus: " << o.operands.size() << " file" << (o.operands.size() == 1 ? "" : "s") << ", "
      << with_commas(words.bytes()) << " bytes, " << with_commas(int64_t(words.counts().size())) << " distinct pieces\n";

  const auto training = std::chrono::steady_clock::now();
  BpeTrainOptions options;
  options.vocab_size = o.vocab;
  options.min_frequency = o.min_frequency;
  const Tokenizer tokenizer = train_bpe(words, options);
  const double train_seconds = seconds_since(training);
  const int64_t size = int64_t(tokenizer.vocab_size());
  out << "vocabulary: " << with_commas(size) << " tokens (256 bytes, " << with_commas(int64_t(tokenizer.merges().size()))
      << " merges, " << kEndOfText << ")";
  if (size < o.vocab) {
    out << ", short of the " << with_commas(o.vocab) << " asked: no pair left occurs " << o.min_frequency
        << " times (--min-frequency)";
  }
  out << "\n";

  save_tokenizer(tokenizer, o.out);
  const std::filesystem::path dir(o.out);
  out << "wrote " << (dir / "vocab.json").string() << " and " << (dir / "merges.txt").string() << "\n";

  // How well the vocabulary does on the text it learned from (read again: the corpus is not kept).
  int64_t tokens = 0;
  for (const std::string& path : o.operands)
    tokens += int64_t(tokenizer.encode(read_file(path, "brigade tokenizer train")).size());
  out << "compression: " << format_fixed(tokens > 0 ? double(words.bytes()) / double(tokens) : 0.0, 2)
      << " bytes/token on the corpus (" << with_commas(tokens) << " tokens)\n";
  out << "time: " << format_fixed(seconds_since(start), 2) << " s (training " << format_fixed(train_seconds, 2)
      << " s)\n";
}

void encode(const TokenizerOptions& o, std::ostream& out) {
  const Tokenizer tokenizer = load_tokenizer(o.tokenizer);
  const std::string text = o.file.empty() ? o.operands[0] : read_file(o.file, "brigade tokenizer encode");
  const std::vector<TokenId> ids = tokenizer.encode(text, o.special ? SpecialText::as_token : SpecialText::as_text);
  for (size_t i = 0; i < ids.size(); ++i) out << (i ? " " : "") << ids[i];
  out << "\n";
}

// IDS operands: whole numbers, as separate arguments or separated by spaces or commas within one.
std::vector<TokenId> parse_ids(const std::vector<std::string>& operands) {
  std::vector<TokenId> ids;
  for (const std::string& operand : operands) {
    std::string number;
    auto flush = [&] {
      if (number.empty()) return;
      ids.push_back(TokenId(cli::parse_int("IDS", number, 0, std::numeric_limits<TokenId>::max())));
      number.clear();
    };
    for (const char c : operand) {
      if (c == ' ' || c == ',' || c == '\n' || c == '\t') {
        flush();
      } else {
        number += c;
      }
    }
    flush();
  }
  if (ids.empty()) throw UsageError("IDS: no token ids given");
  return ids;
}

}  // namespace

int tokenizer_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  ParsedTokenizerArgs parsed;
  std::vector<TokenId> ids;
  try {
    parsed = parse_tokenizer_args(args);
    if (!parsed.help && parsed.options.action == "decode") ids = parse_ids(parsed.options.operands);
  } catch (const UsageError& e) {
    err << "brigade tokenizer: " << e.what() << "\n\n" << tokenizer_usage(args.empty() ? "" : args[0]);
    return 2;
  }
  if (parsed.help) {
    out << tokenizer_usage(parsed.options.action);
    return 0;
  }
  try {
    const TokenizerOptions& o = parsed.options;
    if (o.action == "train") train(o, out);
    if (o.action == "encode") encode(o, out);
    if (o.action == "decode") out << load_tokenizer(o.tokenizer).decode(ids);
  } catch (const std::exception& e) {  // brigade::Error, and the odd std::bad_alloc or filesystem error
    err << "brigade tokenizer " << parsed.options.action << ": error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace brigade::tokenizer_cli
