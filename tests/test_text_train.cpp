// text/: training checked merge by merge against a full recount; vocab.json and merges.txt written,
// read back and refused when bad; `brigade tokenizer` through the command the CLI runs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/json.h"
#include "core/read_file.h"
#include "core/utf8.h"
#include "text/byte_alphabet.h"
#include "text/tokenizer.h"
#include "text/tokenizer_files.h"
#include "text/train.h"
#include "text_test_util.h"
#include "tokenizer/command.h"

using namespace brigade;
using namespace brigade::text;
using namespace text_test;

namespace {

void write(const std::string& path, const std::string& contents) {
  std::ofstream(path, std::ios::binary) << contents;
}

// The message load_tokenizer(dir) throws for these two files.
std::string load_error(const TempDir& dir, const std::string& vocab, const std::string& merges) {
  write(dir.file("vocab.json"), vocab);
  write(dir.file("merges.txt"), merges);
  try {
    load_tokenizer(dir.path.string());
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// A vocab.json of the 256 byte tokens and `extra`, ids in order.
std::string vocab_of(const std::vector<std::string>& extra) {
  std::vector<std::string> tokens = byte_tokens();
  tokens.insert(tokens.end(), extra.begin(), extra.end());
  std::string json = "{";
  for (size_t id = 0; id < tokens.size(); ++id)
    json += (id ? ", " : "") + json_string(tokens[id]) + ": " + std::to_string(id);
  return json + "}";
}

// A JSON string literal in ASCII, the way Python's json.dump writes one (and GPT-2's encoder.json
// is written): every character past U+007F as a \u escape.
std::string ascii_json_string(const std::string& text) {
  std::string out = "\"";
  for (size_t i = 0; i < text.size();) {
    const Utf8Char c = decode_utf8(text, i);
    i += c.length;
    char escaped[8];
    std::snprintf(escaped, sizeof escaped, "\\u%04x", c.code_point);
    out += c.code_point >= 0x80 || c.code_point == '"' || c.code_point == '\\' ? std::string(escaped)
                                                                             : std::string(1, char(c.code_point));
  }
  return out + "\"";
}

struct Run {
  int status;
  std::string out, err;
};
Run run_tokenizer(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int status = brigade::tokenizer_cli::tokenizer_command(args, out, err);
  return {status, out.str(), err.str()};
}

}  // namespace

// ---- training ------------------------------------------------------------------------------------

TEST_CASE("train_bpe: every merge is the most frequent pair of its time, by a full recount", "[text]") {
  // The trainer updates its counts incrementally; the reference recounts every pair of every word
  // before each merge, and breaks ties by the smallest (left id, right id), as documented.
  WordCounts words;
  for (const std::string& text : generated_corpus(51, 30, 120)) words.add(text);
  BpeTrainOptions options;
  options.vocab_size = 450;
  options.min_frequency = 3;
  const Tokenizer tokenizer = train_bpe(words, options);

  std::vector<std::pair<std::vector<TokenId>, int64_t>> corpus;  // each word's tokens, and its count
  for (const auto& [piece, count] : words.counts()) {
    std::vector<TokenId> ids;
    for (const char b : piece) ids.push_back(*tokenizer.find(symbol_of(static_cast<unsigned char>(b))));
    corpus.emplace_back(ids, count);
  }
  auto recount = [&] {
    std::map<std::pair<TokenId, TokenId>, int64_t> counts;
    for (const auto& [ids, count] : corpus)
      for (size_t i = 0; i + 1 < ids.size(); ++i) counts[{ids[i], ids[i + 1]}] += count;
    return counts;
  };
  TokenId next_new = 256;
  for (size_t rank = 0; rank < tokenizer.merges().size(); ++rank) {
    const Tokenizer::Merge& m = tokenizer.merges()[rank];
    const auto counts = recount();
    int64_t best = 0;
    std::pair<TokenId, TokenId> best_pair;
    for (const auto& [pair, count] : counts)  // std::map: in (left, right) order, so the first maximum wins
      if (count > best) best = count, best_pair = pair;
    INFO("merge " << rank);
    REQUIRE(std::make_pair(m.left, m.right) == best_pair);
    REQUIRE(best >= options.min_frequency);
    // A new token takes the next id; a merge that spells a known token reuses its id.
    REQUIRE(m.merged <= next_new);
    if (m.merged == next_new) ++next_new;
    REQUIRE(tokenizer.token(m.merged) == tokenizer.token(m.left) + tokenizer.token(m.right));
    for (auto& [ids, count] : corpus) {
      std::vector<TokenId> merged;
      for (size_t i = 0; i < ids.size(); ++i) {
        const bool here = i + 1 < ids.size() && ids[i] == m.left && ids[i + 1] == m.right;
        merged.push_back(here ? m.merged : ids[i]);
        if (here) ++i;
      }
      ids = merged;
    }
  }
  REQUIRE(size_t(next_new) + 1 == tokenizer.vocab_size());  // and <|endoftext|>
  // It stopped early only because no pair was frequent enough.
  if (tokenizer.vocab_size() < size_t(options.vocab_size)) {
    for (const auto& [pair, count] : recount()) REQUIRE(count < options.min_frequency);
  }
}

TEST_CASE("train_bpe: the vocabulary's layout, determinism, and compression of its corpus", "[text]") {
  const std::vector<std::string> corpus = generated_corpus(61, 50, 200);
  BpeTrainOptions options;
  options.vocab_size = 700;
  const Tokenizer a = train_bpe(corpus, options);
  const Tokenizer b = train_bpe(corpus, options);
  REQUIRE(a.vocab_size() == 700);
  REQUIRE(a.merges().size() >= 700 - 257);  // more only if two merges spelled one token
  REQUIRE(vocab_json(a) == vocab_json(b));
  REQUIRE(merges_txt(a) == merges_txt(b));
  // ids 0..255: the bytes in GPT-2's order; the last: <|endoftext|>.
  for (TokenId id = 0; id < 256; ++id) REQUIRE(a.token_bytes(id) == std::string(1, char(bytes_in_alphabet_order()[size_t(id)])));
  REQUIRE(a.eot_id() == 699);
  REQUIRE(a.token(699) == kEndOfText);
  // <|endoftext|> in the corpus separates documents: it is not learned as text.
  const Tokenizer c = train_bpe({corpus[0] + std::string(kEndOfText) + corpus[1]}, options);
  for (const Tokenizer::Merge& m : c.merges()) REQUIRE(c.token_bytes(m.merged).find("endoftext") == std::string::npos);
  // The vocabulary compresses what it learned from.
  size_t bytes = 0, tokens = 0;
  for (const std::string& text : corpus) {
    bytes += text.size();
    tokens += a.encode(text).size();
  }
  INFO(bytes << " bytes, " << tokens << " tokens");
  REQUIRE(tokens * 2 < bytes);
  REQUIRE_THROWS_WITH(train_bpe(corpus, BpeTrainOptions{256, 2}), Catch::Contains("vocab_size must be at least 257"));
}

// ---- vocab.json and merges.txt -------------------------------------------------------------------

TEST_CASE("tokenizer files: written and read back, the same vocabulary, merges and encodings", "[text]") {
  BpeTrainOptions options;
  options.vocab_size = 500;
  const Tokenizer trained = train_bpe(generated_corpus(71, 30, 150), options);
  TempDir dir;
  save_tokenizer(trained, dir.file("tok"));  // created
  const Tokenizer loaded = load_tokenizer(dir.file("tok"));
  REQUIRE(read_file(dir.file("tok/vocab.json"), "test") == vocab_json(trained));
  REQUIRE(vocab_json(loaded) == vocab_json(trained));
  REQUIRE(merges_txt(loaded) == merges_txt(trained));
  REQUIRE(merges_txt(trained).rfind("#version: 0.2\n", 0) == 0);
  std::mt19937 rng(72);
  for (int trial = 0; trial < 100; ++trial) {
    const std::string text = generated_text(rng, 40);
    REQUIRE(loaded.encode(text) == trained.encode(text));
  }
  // GPT-2's own spelling: one line, non-ASCII as \u escapes, CRLF line ends in merges.txt, and the
  // original file names.
  std::string gpt2_vocab = "{";
  for (size_t id = 0; id < trained.vocab_size(); ++id)
    gpt2_vocab += (id ? ", " : "") + ascii_json_string(trained.token(TokenId(id))) + ": " + std::to_string(id);
  std::string crlf_merges;
  for (const char ch : merges_txt(trained)) crlf_merges += ch == '\n' ? std::string("\r\n") : std::string(1, ch);
  write(dir.file("encoder.json"), gpt2_vocab + "}");
  write(dir.file("vocab.bpe"), crlf_merges);
  const Tokenizer original_names = load_tokenizer(dir.path.string());
  REQUIRE(vocab_json(original_names) == vocab_json(trained));
  REQUIRE(merges_txt(original_names) == merges_txt(trained));
}

TEST_CASE("tokenizer files: bad ones are refused, naming the file and line", "[text]") {
  TempDir dir;
  const std::string vocab = dir.file("vocab.json"), merges = dir.file("merges.txt");
  const std::string ok_vocab = vocab_of({"\xC4\xA0t", "he"});  // "Ġt", "he"
  const std::string ok_merges = "#version: 0.2\n\xC4\xA0 t\nh e\n";
  REQUIRE(load_error(dir, ok_vocab, ok_merges) == "(no error)");
  REQUIRE(load_error(dir, ok_vocab, "#version: 0.2\n\xC4\xA0 t\nh e") == "(no error)");  // no final newline

  using Catch::Contains;
  REQUIRE_THAT(load_error(dir, ok_vocab, "#version: 0.2\n\xC4\xA0 t\nh zz\n"),
               Contains(merges + "' line 3: the merge \"h\" \"zz\" joins \"zz\", which is not in '" + vocab + "'"));
  REQUIRE_THAT(load_error(dir, ok_vocab, "#version: 0.2\nt h\n"),
               Contains(merges + "' line 2: the merge \"t\" \"h\" makes \"th\", which is not in"));
  REQUIRE_THAT(load_error(dir, ok_vocab, "#version: 0.2\nh e\nh e\n"),
               Contains(merges + "' line 3: the merge \"h\" \"e\" repeats merge 0"));
  REQUIRE_THAT(load_error(dir, ok_vocab, "h e\n"), Contains(merges + "' line 1: expected the header '#version: 0.2'"));
  REQUIRE_THAT(load_error(dir, ok_vocab, "#version: 0.2\nh e\nhe\n"),
               Contains(merges + "' line 3: expected two tokens separated by one space, got \"he\""));
  REQUIRE_THAT(load_error(dir, ok_vocab, "#version: 0.2\n\nh e\n"), Contains(merges + "' line 2: expected two tokens"));
  REQUIRE_THAT(load_error(dir, ok_vocab, "#version: 0.2\nh  e\n"), Contains(merges + "' line 2: expected two tokens"));

  std::string duplicate_id = ok_vocab;
  duplicate_id.replace(duplicate_id.rfind("257"), 3, "256");
  REQUIRE_THAT(load_error(dir, duplicate_id, ok_merges),
               Contains(vocab + "': the token \"he\" and the token \"\xC4\xA0t\" both have id 256"));
  std::string past_end = ok_vocab;
  past_end.replace(past_end.rfind("257"), 3, "300");
  REQUIRE_THAT(load_error(dir, past_end, ok_merges),
               Contains(vocab + "': the token \"he\" has id 300, but 258 tokens take the ids 0 to 257"));
  REQUIRE_THAT(load_error(dir, "{\"!\": -1}", ok_merges), Contains("\"!\" has id -1"));
  REQUIRE_THAT(load_error(dir, "{\"!\": \"0\"}", ok_merges), Contains("\"!\" has an id that is not a number"));
  REQUIRE_THAT(load_error(dir, "{\"!\": 0.5}", ok_merges), Contains(vocab + "': invalid JSON vocabulary at byte"));
  REQUIRE_THAT(load_error(dir, "[\"!\"]", ok_merges), Contains("the vocabulary must be a JSON object"));
  REQUIRE_THAT(load_error(dir, "{\"!\": 0, \"!\": 1}", ok_merges), Contains("duplicate key '!'"));
  std::string no_space = ok_vocab;  // 'Ġ' (a space, id 220) renamed to a token that is not a byte
  no_space.replace(no_space.find("\"\xC4\xA0\""), 4, "\"xy\"");
  REQUIRE_THAT(load_error(dir, no_space, "#version: 0.2\n"),
               Contains(vocab + "' has no token for the byte 32 (\"\xC4\xA0\")"));

  std::filesystem::remove(vocab);
  REQUIRE_THROWS_WITH(load_tokenizer(dir.path.string()),
                      Contains("holds no tokenizer.json, nor vocab.json and merges.txt, nor GPT-2's encoder.json and vocab.bpe"));
  REQUIRE_THROWS_WITH(load_tokenizer(vocab, merges), Contains("cannot open '" + vocab + "': No such file"));
}

// ---- brigade tokenizer ---------------------------------------------------------------------------

TEST_CASE("tokenizer command: train, encode and decode through the CLI's own code", "[text]") {
  TempDir dir;
  const std::vector<std::string> corpus = generated_corpus(81, 40, 200);
  for (size_t i = 0; i < 2; ++i) {
    std::string text;
    for (size_t d = i; d < corpus.size(); d += 2) text += corpus[d] + "\n";
    write(dir.file("corpus" + std::to_string(i) + ".txt"), text);
  }
  const std::string out_dir = dir.file("tok");
  const Run train = run_tokenizer({"train", "--vocab", "400", "--out", out_dir, dir.file("corpus0.txt"),
                                   dir.file("corpus1.txt")});
  INFO(train.out << train.err);
  REQUIRE(train.status == 0);
  REQUIRE_THAT(train.out, Catch::Contains("corpus: 2 files, "));
  REQUIRE_THAT(train.out, Catch::Contains("vocabulary: 400 tokens (256 bytes, 143 merges, <|endoftext|>)"));
  REQUIRE_THAT(train.out, Catch::Contains("wrote " + out_dir + "/vocab.json and " + out_dir + "/merges.txt"));
  REQUIRE_THAT(train.out, Catch::Contains(" bytes/token on the corpus ("));
  REQUIRE_THAT(train.out, Catch::Contains("time: "));
  const Tokenizer tokenizer = load_tokenizer(out_dir);
  REQUIRE(tokenizer.vocab_size() == 400);

  const std::string text = "Hello, the tokenizer's merges <|endoftext|> caf\u00E9";
  auto ids_text = [](const std::vector<TokenId>& ids) {
    std::string s;
    for (const TokenId id : ids) s += std::to_string(id) + " ";
    s.back() = '\n';
    return s;
  };
  const Run encode = run_tokenizer({"encode", "--tokenizer", out_dir, text});
  REQUIRE(encode.status == 0);
  REQUIRE(encode.out == ids_text(tokenizer.encode(text)));
  const Run special = run_tokenizer({"encode", "--tokenizer", out_dir, "--special", text});
  REQUIRE(special.out == ids_text(tokenizer.encode(text, SpecialText::as_token)));
  REQUIRE(special.out != encode.out);
  write(dir.file("bytes.bin"), std::string("\xFF\x00 x\n", 5));
  const Run file = run_tokenizer({"encode", "--tokenizer", out_dir, "--file", dir.file("bytes.bin")});
  REQUIRE(file.out == ids_text(tokenizer.encode(std::string("\xFF\x00 x\n", 5))));

  std::vector<std::string> decode_args = {"decode", "--tokenizer", out_dir};
  const std::vector<TokenId> ids = tokenizer.encode(text);
  for (const TokenId id : ids) decode_args.push_back(std::to_string(id));
  REQUIRE(run_tokenizer(decode_args).out == text);  // exactly the bytes, nothing added
  std::string one_operand = encode.out;
  one_operand.pop_back();
  REQUIRE(run_tokenizer({"decode", "--tokenizer", out_dir, one_operand}).out == text);

  // A runtime problem: exit 1, with the reason.
  const Run bad_id = run_tokenizer({"decode", "--tokenizer", out_dir, "400"});
  REQUIRE(bad_id.status == 1);
  REQUIRE_THAT(bad_id.err, Catch::Contains("brigade tokenizer decode: error: Tokenizer: no token has id 400"));
  const Run missing = run_tokenizer({"encode", "--tokenizer", dir.file("nowhere"), "x"});
  REQUIRE(missing.status == 1);
  REQUIRE_THAT(missing.err, Catch::Contains("holds no tokenizer.json, nor vocab.json"));
  const Run no_corpus = run_tokenizer({"train", "--vocab", "300", "--out", out_dir, dir.file("nothing.txt")});
  REQUIRE(no_corpus.status == 1);
  REQUIRE_THAT(no_corpus.err, Catch::Contains("cannot open '" + dir.file("nothing.txt") + "': No such file"));
}

TEST_CASE("tokenizer command: --help, and exit status 2 with the usage on a bad command line", "[text]") {
  const Run help = run_tokenizer({"--help"});
  REQUIRE(help.status == 0);
  REQUIRE_THAT(help.out, Catch::Contains("usage: brigade tokenizer <action>"));
  const Run train_help = run_tokenizer({"train", "--help"});
  REQUIRE(train_help.status == 0);
  for (const char* flag : {"--vocab", "--out", "--min-frequency"}) REQUIRE_THAT(train_help.out, Catch::Contains(flag));
  REQUIRE_THAT(run_tokenizer({"encode", "-h"}).out, Catch::Contains("--special"));
  REQUIRE_THAT(run_tokenizer({"decode", "--help"}).out, Catch::Contains("usage: brigade tokenizer decode"));

  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{}, "expected an action: train, encode or decode"},
      {{"tokenise"}, "unknown action 'tokenise'"},
      {{"train", "--vocab-size", "300"}, "unknown flag '--vocab-size'"},
      {{"train", "--vocab", "100", "--out", "d", "f"}, "--vocab: must be at least 257, got 100"},
      {{"train", "--vocab", "lots", "--out", "d", "f"}, "--vocab: expected a whole number, got 'lots'"},
      {{"train", "--out", "d", "f"}, "--vocab: required"},
      {{"train", "--vocab", "300", "f"}, "--out: required"},
      {{"train", "--vocab", "300", "--out", "d"}, "no corpus"},
      {{"encode", "x"}, "--tokenizer: required"},
      {{"encode", "--tokenizer", "d"}, "nothing to encode"},
      {{"encode", "--tokenizer", "d", "a", "b"}, "one TEXT only, got 2"},
      {{"encode", "--tokenizer", "d", "--file", "f", "a"}, "give TEXT or --file, not both"},
      {{"encode", "--tokenizer", "d", "--special=yes", "a"}, "--special: takes no value"},
      {{"decode", "--tokenizer", "d"}, "no ids to decode"},
      {{"decode", "--tokenizer", "d", "12", "x3"}, "IDS: expected a whole number, got 'x3'"},
      {{"decode", "--tokenizer", "d", "-5"}, "IDS: must be between 0 and"},
  };
  for (const auto& [args, message] : bad) {
    const Run run = run_tokenizer(args);
    INFO(run.err);
    REQUIRE(run.status == 2);
    REQUIRE_THAT(run.err, Catch::Contains("brigade tokenizer: " + message));
    REQUIRE_THAT(run.err, Catch::Contains("usage: brigade tokenizer"));
    REQUIRE(run.out.empty());
  }
  // An operand that starts with "--" comes after a lone "--".
  TempDir dir;
  save_tokenizer(Tokenizer(byte_tokens(), {}), dir.path.string());
  const Run dashes = run_tokenizer({"encode", "--tokenizer", dir.path.string(), "--", "--x"});
  REQUIRE(dashes.status == 0);
  REQUIRE(dashes.out == "12 12 87\n");  // '-' is id 12, 'x' 87
}
