// text/: the pre-tokenisers of LLaMA 3 and Qwen2 beside GPT-2's, on hand-worked cases; Hugging
// Face's tokenizer.json read (a tiny one the test writes, its encodings worked out by hand), written
// back, carried in checkpoint metadata, and refused when it holds what brigade does not implement.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/json.h"
#include "text/byte_alphabet.h"
#include "text/nfc.h"
#include "text/pretokenize.h"
#include "text/tokenizer.h"
#include "text/tokenizer_files.h"
#include "text/tokenizer_json.h"
#include "text_test_util.h"

using namespace brigade;
using namespace brigade::text;
using namespace text_test;
using Catch::Contains;

namespace {

std::vector<std::string> pieces(const std::string& text, SplitPattern pattern) {
  std::vector<std::string> out;
  for (const std::string_view p : pretokenize(text, pattern)) out.emplace_back(p);
  return out;
}

using Pieces = std::vector<std::string>;

}  // namespace

// ---- the pre-tokenisers --------------------------------------------------------------------------

TEST_CASE("pre-tokenisers: LLaMA 3's and Qwen2's patterns beside GPT-2's, worked by hand", "[text]") {
  const SplitPattern gpt2 = SplitPattern::gpt2, llama3 = SplitPattern::llama3, qwen2 = SplitPattern::qwen2;
  // Contractions: LLaMA 3's (?i:...) takes them in any case (and 'ſ folds to 's); GPT-2's only lower case.
  REQUIRE(pieces("I'M here", gpt2) == Pieces{"I", "'", "M", " here"});
  REQUIRE(pieces("I'M here", llama3) == Pieces{"I", "'M", " here"});
  REQUIRE(pieces("don'T we'LL", llama3) == Pieces{"don", "'T", " we", "'LL"});
  REQUIRE(pieces("don'T we'LL", qwen2) == Pieces{"don", "'T", " we", "'LL"});
  // Where letters follow, the case decides: without (?i:...), "'" would take the whole word.
  REQUIRE(pieces("O'REILLY'S 'Tis", llama3) == Pieces{"O", "'RE", "ILLY", "'S", " '", "Tis"});
  REQUIRE(pieces("O'REILLY'S 'Tis", gpt2) == Pieces{"O", "'", "REILLY", "'", "S", " '", "Tis"});
  REQUIRE(pieces("'TIS THEY'VEN", qwen2) == Pieces{"'T", "IS", " THEY", "'VE", "N"});
  REQUIRE(pieces("it's", llama3) == Pieces{"it", "'s"});
  REQUIRE(pieces("'\u017Ftop", llama3) == Pieces{"'\u017F", "top"});
  REQUIRE(pieces("'\u017Ftop", gpt2) == Pieces{"'", "\u017Ftop"});
  REQUIRE(pieces(" 's", llama3) == Pieces{" '", "s"});  // a contraction only where the piece starts
  // Numbers: GPT-2 one run, LLaMA 3 runs of up to three, Qwen2 one digit each (any \p{N}).
  REQUIRE(pieces("12345 67", gpt2) == Pieces{"12345", " 67"});
  REQUIRE(pieces("12345 67", llama3) == Pieces{"123", "45", " ", "67"});
  REQUIRE(pieces("12345 67", qwen2) == Pieces{"1", "2", "3", "4", "5", " ", "6", "7"});
  REQUIRE(pieces("\u00E912\u0663\u0664\u0665\u0666", llama3) == Pieces{"\u00E9", "12\u0663", "\u0664\u0665\u0666"});
  REQUIRE(pieces("3rd", llama3) == Pieces{"3", "rd"});
  // A word takes one character before it that is not a line break, letter or number.
  REQUIRE(pieces("(hello) .World", gpt2) == Pieces{"(", "hello", ")", " .", "World"});
  REQUIRE(pieces("(hello) .World", llama3) == Pieces{"(hello", ")", " .", "World"});
  REQUIRE(pieces("a\tb", gpt2) == Pieces{"a", "\t", "b"});
  REQUIRE(pieces("a\tb", llama3) == Pieces{"a", "\tb"});
  REQUIRE(pieces("a\u3000b", llama3) == Pieces{"a", "\u3000b"});
  REQUIRE(pieces("a \u00A0b", llama3) == Pieces{"a", " ", "\u00A0b"});
  // Line breaks: white space up to its last line break is one piece; punctuation keeps those after it.
  REQUIRE(pieces("a\n\nb", gpt2) == Pieces{"a", "\n", "\n", "b"});
  REQUIRE(pieces("a\n\nb", llama3) == Pieces{"a", "\n\n", "b"});
  REQUIRE(pieces("x  \n  y", gpt2) == Pieces{"x", "  \n ", " y"});
  REQUIRE(pieces("x  \n  y", llama3) == Pieces{"x", "  \n", " ", " y"});
  REQUIRE(pieces("end.\n\nNext", gpt2) == Pieces{"end", ".", "\n", "\n", "Next"});
  REQUIRE(pieces("end.\n\nNext", qwen2) == Pieces{"end", ".\n\n", "Next"});
  REQUIRE(pieces("\r\nword", gpt2) == Pieces{"\r", "\n", "word"});
  REQUIRE(pieces("\r\nword", llama3) == Pieces{"\r\n", "word"});
  REQUIRE(pieces("  \n", llama3) == Pieces{"  \n"});
  // Spaces before punctuation: the last one joins it, as in GPT-2.
  REQUIRE(pieces("a !!", llama3) == Pieces{"a", " !!"});
  REQUIRE(pieces("x   ;", gpt2) == Pieces{"x", "  ", " ;"});
  REQUIRE(pieces("x   ;", llama3) == Pieces{"x", "  ", " ;"});
}

TEST_CASE("pre-tokenisers: the regexes named by their exact text; any bytes covered", "[text]") {
  for (const SplitPattern p : {SplitPattern::gpt2, SplitPattern::llama3, SplitPattern::qwen2})
    REQUIRE(split_pattern_named(split_pattern_regex(p)) == p);
  REQUIRE(split_pattern_regex(SplitPattern::llama3) ==
          R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)");
  REQUIRE(!split_pattern_named(R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s)").has_value());
  std::mt19937 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    const std::string text = trial % 2 ? random_bytes(rng, 1 + rng() % 40) : generated_text(rng, 12);
    for (const SplitPattern p : {SplitPattern::llama3, SplitPattern::qwen2}) {
      std::string joined;
      for (const std::string& piece : pieces(text, p)) {
        REQUIRE(!piece.empty());
        joined += piece;
      }
      REQUIRE(joined == text);
    }
  }
}

// ---- NFC -----------------------------------------------------------------------------------------

TEST_CASE("NFC: decomposition, canonical order, composition and blocking, worked by hand", "[text]") {
  REQUIRE(nfc("plain ASCII") == "plain ASCII");
  REQUIRE(nfc("cafe\u0301") == "caf\u00E9");                       // e + acute -> é
  REQUIRE(nfc("\u212B \u2126") == "\u00C5 \u03A9");               // singletons: Angstrom -> Å, Ohm -> Ω
  REQUIRE(nfc("a\u0302\u0323") == "\u1EAD");                       // dot below (220) before circumflex (230)
  REQUIRE(nfc("\u1E9B\u0323") == "\u1E9B\u0323");                 // long s: 017F 0323 0307 -> 1E9B 0323
  REQUIRE(nfc("\u1100\u1161\u11A8\u0301") == "\uAC01\u0301");   // Hangul L V T by arithmetic
  REQUIRE(nfc("\u0958") == "\u0915\u093C");                        // excluded from composition
  REQUIRE(nfc("\u0B47\u0B3E") == "\u0B4B");                        // two starters compose
  REQUIRE(nfc("\u00C5\u0301") == "\u01FA");                        // recomposed through A + ring
  REQUIRE(nfc("a\u0301\u0301") == "\u00E1\u0301");                // no composite for the second
  REQUIRE(nfc("e\u0305\u0301") == "e\u0305\u0301");               // blocked by a mark of the same class
  REQUIRE(nfc(std::string("e\xFF\u0301", 4)) == std::string("e\xFF\u0301", 4));  // a bad byte blocks
  REQUIRE(combining_class(0x301) == 230);
  REQUIRE(combining_class('a') == 0);
}

// ---- a tiny tokenizer.json -----------------------------------------------------------------------

namespace {

// Byte b is token b (its byte-alphabet spelling); then the merges' tokens from 256 in merge order,
// then the extra tokens, then the added tokens.
struct TinyJson {
  std::vector<std::pair<std::string, std::string>> merges = {{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"},
                                                               {"\u0120", "w"}};  // Ġ w
  std::vector<std::string> extra = {"\u0120wor"};  // " wor": no merge makes it
  std::vector<std::pair<std::string, std::string>> more_merges;  // listed after `merges`, their tokens not in the vocabulary
  std::string pattern = std::string(split_pattern_regex(SplitPattern::llama3));
  bool ignore_merges = false;
  bool merges_as_pairs = false;
  std::string normalizer = "null";
  std::string model_type = "BPE";
  std::string added = R"({"id": 262, "content": "<|begin_of_text|>", "special": true},
    {"id": 263, "content": "<|eot|>", "special": true},
    {"id": 264, "content": "<|eot|>!", "special": true},
    {"id": 265, "content": "<tool>", "special": false})";

  std::string text() const {
    std::string vocab;
    for (int b = 0; b < 256; ++b) vocab += json_string(bytes_to_symbols(std::string(1, char(b)))) + ": " + std::to_string(b) + ", ";
    int id = 256;
    for (const auto& [l, r] : merges) vocab += json_string(l + r) + ": " + std::to_string(id++) + ", ";
    for (const std::string& t : extra) vocab += json_string(t) + ": " + std::to_string(id++) + ", ";
    vocab.resize(vocab.size() - 2);
    std::string merge_list;
    std::vector<std::pair<std::string, std::string>> all = merges;
    all.insert(all.end(), more_merges.begin(), more_merges.end());
    for (const auto& [l, r] : all)
      merge_list += (merge_list.empty() ? "" : ", ") +
                    (merges_as_pairs ? "[" + json_string(l) + ", " + json_string(r) + "]" : json_string(l + " " + r));
    return R"({"version": "1.0", "added_tokens": [)" + added + R"(], "normalizer": )" + normalizer +
           R"(, "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": )" +
           json_string(pattern) + R"(}, "behavior": "Isolated", "invert": false}, {"type": "ByteLevel", )"
           R"("add_prefix_space": false, "trim_offsets": true, "use_regex": false}]}, "post_processor": null, )"
           R"("decoder": {"type": "ByteLevel"}, "model": {"type": ")" + model_type +
           R"(", "dropout": null, "unk_token": null, "ignore_merges": )" + (ignore_merges ? "true" : "false") +
           R"(, "vocab": {)" + vocab + "}, \"merges\": [" + merge_list + "]}}";
  }
};

std::vector<TokenId> bytes_of(const std::string& text) {
  std::vector<TokenId> ids;
  for (const char c : text) ids.push_back(TokenId(static_cast<unsigned char>(c)));
  return ids;
}

std::vector<TokenId> cat(std::vector<std::vector<TokenId>> parts) {
  std::vector<TokenId> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// The message parse_tokenizer_json throws for this tokenizer.json.
std::string refusal(const std::string& json) {
  try {
    parse_tokenizer_json(json, "tiny/tokenizer.json");
  } catch (const Error& e) {
    return e.what();
  }
  FAIL("the tokenizer.json was read");
  return "";
}

}  // namespace

TEST_CASE("tokenizer.json: a tiny one, its encodings worked out by hand", "[text]") {
  TinyJson tiny;
  const Tokenizer t = parse_tokenizer_json(tiny.text(), "tiny/tokenizer.json");
  REQUIRE(t.vocab_size() == 266);
  REQUIRE(t.split_pattern() == SplitPattern::llama3);
  // "hello": h e -> he (rank 0), l l -> ll (1), he ll -> hell (2), hell o -> hello (3) = 259.
  // " world": Ġ w -> Ġw (4) = 260, then o r l d alone.
  REQUIRE(t.encode("hello world") == cat({{259, 260}, bytes_of("orld")}));
  // LLaMA 3's pieces: "HELLO'S" is "HELLO", "'S" (no merges: upper case); "1234" is "123", "4".
  REQUIRE(t.encode("HELLO'S 1234") == bytes_of("HELLO'S 1234"));
  // Special tokens only when asked; the longest at a place wins ("<|eot|>!" over "<|eot|>"); the text
  // around each is encoded on its own. "<tool>" is an added token that is not special: always found.
  const std::string text = "<|begin_of_text|>hello<|eot|>!<|eot|> <tool>hello";
  REQUIRE(t.encode(text, SpecialText::as_token) == std::vector<TokenId>{262, 259, 264, 263, 32, 265, 259});
  REQUIRE(t.encode(text) == cat({bytes_of("<|begin_of_text|>"), {259}, bytes_of("<|eot|>!<|eot|> "), {265, 259}}));
  REQUIRE(t.decode(t.encode(text, SpecialText::as_token)) == text);
  REQUIRE(t.decode({262, 260}) == "<|begin_of_text|> w");

  // Both spellings of a merge read the same.
  tiny.merges_as_pairs = true;
  REQUIRE(parse_tokenizer_json(tiny.text()).encode("hello world") == t.encode("hello world"));

  // ignore_merges: " wor" is a token (261) no merge makes; as a whole piece it is taken as it is.
  REQUIRE(t.encode("hello wor") == cat({{259, 260}, bytes_of("or")}));
  tiny.ignore_merges = true;
  REQUIRE(parse_tokenizer_json(tiny.text()).encode("hello wor") == std::vector<TokenId>{259, 261});
  REQUIRE(parse_tokenizer_json(tiny.text()).encode("hello world") == t.encode("hello world"));

  // Qwen2's pattern and NFC normaliser: "he\u0301llo" is "h" "é" "llo" whichever way é is spelled;
  // the added tokens are found before normalising.
  tiny.pattern = std::string(split_pattern_regex(SplitPattern::qwen2));
  tiny.normalizer = R"({"type": "NFC"})";
  const Tokenizer qwen = parse_tokenizer_json(tiny.text());
  REQUIRE(qwen.split_pattern() == SplitPattern::qwen2);
  REQUIRE(qwen.nfc());
  const std::vector<TokenId> composed = cat({{'h'}, bytes_of("\u00E9"), {257, 'o'}});  // ll (1)
  REQUIRE(qwen.encode("h\u00E9llo") == composed);
  REQUIRE(qwen.encode("he\u0301llo") == composed);
  REQUIRE(t.encode("he\u0301llo") == cat({{256}, bytes_of("\u0301"), {257, 'o'}}));  // he (0), ll (1)
  REQUIRE(qwen.encode("<|eot|>e\u0301", SpecialText::as_token) == cat({{263}, bytes_of("\u00E9")}));
  REQUIRE(qwen.decode(qwen.encode("e\u0301 2024")) == "\u00E9 2024");

  // Any bytes, invalid UTF-8 included, decode to themselves.
  std::mt19937 rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    const std::string bytes = random_bytes(rng, 1 + rng() % 64) + (trial % 3 ? "" : "<|eot|>hello\n\n 123456");
    REQUIRE(t.decode(t.encode(bytes)) == bytes);
    REQUIRE(t.decode(t.encode(bytes, SpecialText::as_token)) == bytes);
  }
}

TEST_CASE("tokenizer.json: written and read back; saved beside or instead of GPT-2's files; in metadata", "[text]") {
  TinyJson tiny;
  tiny.ignore_merges = true;
  const Tokenizer t = parse_tokenizer_json(tiny.text(), "tiny/tokenizer.json");
  REQUIRE(!t.is_gpt2_style());
  const Tokenizer back = parse_tokenizer_json(tokenizer_json(t), "written");
  REQUIRE(tokenizer_json(back) == tokenizer_json(t));
  REQUIRE(back.ignore_merges());
  REQUIRE(back.added_tokens().size() == 4);
  const std::string text = "<|begin_of_text|>hello wor 12345\n\n<tool>";
  REQUIRE(back.encode(text, SpecialText::as_token) == t.encode(text, SpecialText::as_token));

  TempDir dir;
  REQUIRE(save_tokenizer(t, dir.file("tok")) == "tokenizer.json");
  REQUIRE(load_tokenizer(dir.file("tok")).encode(text, SpecialText::as_token) == t.encode(text, SpecialText::as_token));
  // A GPT-2-style tokenizer saved over it leaves only vocab.json and merges.txt, which are read back.
  const Tokenizer plain(byte_tokens(), {});
  REQUIRE(save_tokenizer(plain, dir.file("tok")) == "vocab.json, merges.txt");
  REQUIRE(!std::filesystem::exists(dir.file("tok/tokenizer.json")));
  REQUIRE(load_tokenizer(dir.file("tok")).split_pattern() == SplitPattern::gpt2);
  REQUIRE(save_tokenizer(t, dir.file("tok")) == "tokenizer.json");
  REQUIRE(!std::filesystem::exists(dir.file("tok/vocab.json")));

  tiny.normalizer = R"({"type": "NFC"})";
  REQUIRE(parse_tokenizer_json(tokenizer_json(parse_tokenizer_json(tiny.text()))).nfc());

  std::map<std::string, std::string> meta;
  add_tokenizer_metadata(t, meta);
  REQUIRE(meta.count("tokenizer.json") == 1);
  REQUIRE(tokenizer_from_metadata(meta, "ckpt")->encode(text) == t.encode(text));
  std::map<std::string, std::string> plain_meta;
  add_tokenizer_metadata(plain, plain_meta);
  REQUIRE(plain_meta.count("tokenizer.vocab_json") == 1);
  REQUIRE(!tokenizer_from_metadata({}, "ckpt").has_value());
}

TEST_CASE("tokenizer.json: GPT-2's own layout (ByteLevel alone, <|endoftext|> added) reads as GPT-2's files do", "[text]") {
  std::vector<std::string> tokens = byte_tokens();
  tokens.push_back("\u0120t");  // Ġt
  tokens.push_back(std::string(kEndOfText));
  const Tokenizer files(tokens, {{"\u0120", "t"}});
  std::string vocab;
  for (size_t id = 0; id < tokens.size(); ++id) vocab += (id ? ", " : "") + json_string(tokens[id]) + ": " + std::to_string(id);
  const std::string json =
      R"({"added_tokens": [{"id": 257, "content": "<|endoftext|>", "single_word": false, "lstrip": false, "rstrip": false, )"
      R"("normalized": true, "special": true}], "normalizer": null, "pre_tokenizer": {"type": "ByteLevel", )"
      R"("add_prefix_space": false, "trim_offsets": true}, "decoder": {"type": "ByteLevel"}, "model": {"type": "BPE", )"
      R"("dropout": null, "unk_token": null, "continuing_subword_prefix": "", "end_of_word_suffix": "", "vocab": {)" +
      vocab + R"(}, "merges": ["Ġ t"]}})";
  const Tokenizer hf = parse_tokenizer_json(json, "gpt2/tokenizer.json");
  REQUIRE(hf.is_gpt2_style());
  REQUIRE(hf.split_pattern() == SplitPattern::gpt2);
  const std::string text = "it's the 12345\n\n  tea<|endoftext|>I'M";
  REQUIRE(hf.encode(text) == files.encode(text));
  REQUIRE(hf.encode(text, SpecialText::as_token) == files.encode(text, SpecialText::as_token));
  const std::vector<TokenId> special = hf.encode(text, SpecialText::as_token);
  REQUIRE(std::count(special.begin(), special.end(), 257) == 1);
  REQUIRE(std::count(special.begin(), special.end(), 256) == 2);  // " the", " tea"
  REQUIRE(vocab_json(hf) == vocab_json(files));
}

TEST_CASE("tokenizer.json: what brigade does not implement is refused, naming the file and the part", "[text]") {
  const std::string file = "load_tokenizer: 'tiny/tokenizer.json': ";
  TinyJson tiny;
  tiny.model_type = "Unigram";
  REQUIRE_THAT(refusal(tiny.text()), Contains(file + "model.type is \"Unigram\": only byte-level BPE models"));
  tiny = {};
  tiny.pattern = R"(\p{L}+|\p{N}+|[^\p{L}\p{N}]+)";
  REQUIRE_THAT(refusal(tiny.text()), Contains(file + R"(pre_tokenizer.pretokenizers[0].pattern is the regex "\\p{L}+|\\p{N}+|[^\\p{L}\\p{N}]+", which brigade does not implement)"));
  tiny = {};
  tiny.more_merges.push_back({"x", "\u0120wor"});  // "xĠwor" is in no vocabulary
  REQUIRE_THAT(refusal(tiny.text()), Contains("load_tokenizer: 'tiny/tokenizer.json' (model.merges), merge 5: the merge \"x\" \"Ġwor\" makes \"xĠwor\", which is not in 'tiny/tokenizer.json'"));
  tiny = {};
  tiny.more_merges.push_back({"q", "zz"});
  REQUIRE_THAT(refusal(tiny.text()), Contains("merge 5: the merge \"q\" \"zz\" joins \"zz\", which is not in"));
  tiny = {};
  tiny.normalizer = R"({"type": "NFKC"})";
  REQUIRE_THAT(refusal(tiny.text()), Contains(file + "normalizer is NFKC: brigade implements only NFC"));
  tiny = {};
  tiny.added = R"({"id": 270, "content": "<|far|>", "special": true})";
  REQUIRE_THAT(refusal(tiny.text()), Contains(file + "model.vocab and added_tokens have no token with id 262"));
  tiny = {};
  tiny.added = R"({"id": 65, "content": "<|clash|>", "special": true})";
  REQUIRE_THAT(refusal(tiny.text()), Contains(file + "added_tokens[0] gives id 65 to \"<|clash|>\", but model.vocab gives it to \"A\""));
  tiny = {};
  tiny.added = R"({"id": 262, "content": "<|x|>", "special": true, "lstrip": true})";
  REQUIRE_THAT(refusal(tiny.text()), Contains(file + "added_tokens[0] (\"<|x|>\") sets lstrip, which brigade does not implement"));
  const std::string json = TinyJson{}.text();
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string s = json;
    REQUIRE(s.find(from) != std::string::npos);
    return s.replace(s.find(from), from.size(), to);
  };
  REQUIRE_THAT(refusal(replaced("\"add_prefix_space\": false", "\"add_prefix_space\": true")),
               Contains(file + "pre_tokenizer.pretokenizers[1].add_prefix_space is true"));
  REQUIRE_THAT(refusal(replaced("\"behavior\": \"Isolated\"", "\"behavior\": \"Removed\"")),
               Contains(file + "pre_tokenizer.pretokenizers[0].behavior is Removed: brigade implements \"Isolated\""));
  REQUIRE_THAT(refusal(replaced("\"dropout\": null", "\"dropout\": 0.1")), Contains(file + "model.dropout is set"));
  REQUIRE_THAT(refusal(replaced("\"decoder\": {\"type\": \"ByteLevel\"}", "\"decoder\": null")),
               Contains(file + "decoder must be ByteLevel"));
  REQUIRE_THAT(refusal("{\"model\": "), Contains(file + "invalid JSON tokenizer.json at byte"));
}

TEST_CASE("tokenizer.json: an added token's content is text as written, not the byte alphabet", "[text]") {
  // "é!" is also how the byte alphabet spells the bytes 0xE9 0x21; as an added token it stands for its
  // own UTF-8 bytes, and encoding and decoding keep them.
  TinyJson tiny;
  tiny.added += ",\n    {\"id\": 266, \"content\": \"\u00E9!\", \"special\": false}";
  const Tokenizer t = parse_tokenizer_json(tiny.text(), "tiny/tokenizer.json");
  REQUIRE(t.encode("caf\u00E9!") == cat({bytes_of("caf"), {266}}));
  REQUIRE(t.decode({266}) == "\u00E9!");
  REQUIRE(t.decode(t.encode("caf\u00E9! <tool>")) == "caf\u00E9! <tool>");
}
