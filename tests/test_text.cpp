// text/: GPT-2's byte alphabet, the Unicode classes and the pre-tokeniser, BPE encoding and decoding
// against a hand-worked example and against a naive reference written here, round trips of any
// bytes. Training, the files and the CLI: test_text_train.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/utf8.h"
#include "text/byte_alphabet.h"
#include "text/merge_table.h"
#include "text/pretokenize.h"
#include "text/tokenizer.h"
#include "text/tokenizer_files.h"
#include "text/train.h"
#include "text/unicode_classes.h"
#include "text_test_util.h"

using namespace brigade;
using namespace brigade::text;
using namespace text_test;

// ---- the byte alphabet ---------------------------------------------------------------------------

TEST_CASE("byte alphabet: GPT-2's bytes_to_unicode, written out here independently", "[text]") {
  // The 188 printable bytes stand for themselves; the other 68 take U+0100, U+0101, ... in byte order.
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    const uint32_t expected = printable ? b : next++;
    REQUIRE(byte_to_code_point(uint8_t(b)) == expected);
    REQUIRE(code_point_to_byte(expected) == uint8_t(b));
  }
  REQUIRE(next == 256 + 68);
  REQUIRE(!code_point_to_byte(256 + 68).has_value());
  REQUIRE(!code_point_to_byte(0x20).has_value());  // a space is not a character of the alphabet
  // Values everyone who has read a GPT-2 vocabulary knows: 'Ġ' is a space, 'Ċ' a newline.
  REQUIRE(byte_to_code_point(' ') == 0x120);
  REQUIRE(byte_to_code_point('\n') == 0x10A);
  REQUIRE(byte_to_code_point(0x00) == 0x100);
  REQUIRE(byte_to_code_point(0x7F) == 0x121);
  REQUIRE(byte_to_code_point(0xAD) == 0x143);
  REQUIRE(bytes_to_symbols(" the\n") == "\xC4\xA0the\xC4\x8A");  // "Ġthe" "Ċ"
  // GPT-2's ids 0..255: '!' is 0, 'A' 32, 'Ġ' 220, and the last is the soft hyphen.
  const auto& order = bytes_in_alphabet_order();
  REQUIRE(order[0] == '!');
  REQUIRE(order[32] == 'A');
  REQUIRE(order[188] == 0x00);
  REQUIRE(order[220] == ' ');
  REQUIRE(order[255] == 0xAD);
}

TEST_CASE("byte alphabet: any bytes spell and read back; other text is refused", "[text]") {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    const std::string bytes = random_bytes(rng, rng() % 40);
    const std::string symbols = bytes_to_symbols(bytes);
    REQUIRE(is_utf8(symbols));
    REQUIRE(symbols_to_bytes(symbols) == bytes);
  }
  REQUIRE(!symbols_to_bytes("a b").has_value());         // U+0020 is not in the alphabet
  REQUIRE(!symbols_to_bytes("\xE2\x96\x81").has_value());  // nor is U+2581
  REQUIRE(!symbols_to_bytes("\xFF").has_value());        // not UTF-8
}

// ---- the Unicode classes -------------------------------------------------------------------------

TEST_CASE("unicode classes: the tables are sorted and disjoint, and classify known characters", "[text]") {
  const std::vector<std::pair<const CodePointRange*, size_t>> tables = {
      {kLetterRanges, kLetterRangesCount}, {kNumberRanges, kNumberRangesCount}, {kSpaceRanges, kSpaceRangesCount}};
  for (const auto& [ranges, count] : tables) {
    REQUIRE(count > 0);
    for (size_t i = 0; i < count; ++i) {
      REQUIRE(ranges[i].first <= ranges[i].last);
      if (i > 0) REQUIRE(ranges[i - 1].last + 1 < ranges[i].first);  // sorted, and adjacent ranges joined
    }
  }
  // Each from the Unicode Character Database, by hand.
  const std::vector<std::pair<uint32_t, CharClass>> known = {
      {'a', CharClass::letter},     {'Z', CharClass::letter},      {0xE9, CharClass::letter} /* é Ll */,
      {0x1C5, CharClass::letter} /* ǅ Lt */, {0x2B0, CharClass::letter} /* ʰ Lm */, {0x4E2D, CharClass::letter} /* 中 Lo */,
      {0xAA, CharClass::letter} /* ª Lo */, {'7', CharClass::number},  {0x663, CharClass::number} /* ٣ Nd */,
      {0xB2, CharClass::number} /* ² No */, {0x216B, CharClass::number} /* Ⅻ Nl */, {0x1D7D8, CharClass::number},
      {' ', CharClass::space},      {'\t', CharClass::space},      {'\r', CharClass::space},
      {0x0B, CharClass::space},     {0x85, CharClass::space},      {0xA0, CharClass::space},
      {0x1680, CharClass::space},   {0x2028, CharClass::space},    {0x3000, CharClass::space},
      {0x1C, CharClass::other} /* isspace() in Python, but not White_Space */,
      {0x200B, CharClass::other} /* zero-width space: Cf */, {0x180E, CharClass::other} /* left White_Space in 6.3 */,
      {0x301, CharClass::other} /* combining acute: Mn */, {'_', CharClass::other}, {0x1F600, CharClass::other},
      {0x10FFFF, CharClass::other}, {0x110000, CharClass::other}, {0xFFFFFFFF, CharClass::other}};
  for (const auto& [cp, expected] : known) {
    INFO("U+" << std::hex << cp);
    REQUIRE(char_class(cp) == expected);
  }
}

// ---- the pre-tokeniser ---------------------------------------------------------------------------

TEST_CASE("pretokenize: GPT-2's regex, hand-checked", "[text]") {
  using Pieces = std::vector<std::string>;
  auto pieces = [](const std::string& text) {
    Pieces out;
    for (const std::string_view p : pretokenize(text)) out.emplace_back(p);
    return out;
  };
  REQUIRE(pieces("Hello world") == Pieces{"Hello", " world"});
  REQUIRE(pieces("I'm") == Pieces{"I", "'m"});
  // Of a run of spaces before a word, the word takes the last one.
  REQUIRE(pieces("it's  there") == Pieces{"it", "'s", " ", " there"});
  REQUIRE(pieces("  a") == Pieces{" ", " a"});
  // At the end of the text, the run stays whole.
  REQUIRE(pieces("trailing   ") == Pieces{"trailing", "   "});
  REQUIRE(pieces("x  \n y") == Pieces{"x", "  \n", " y"});
  REQUIRE(pieces("\n\n") == Pieces{"\n\n"});
  // A single white space before a non-space is a piece of its own; only U+0020 joins the word.
  REQUIRE(pieces("x\n\ny") == Pieces{"x", "\n", "\n", "y"});
  REQUIRE(pieces(" \t\nb") == Pieces{" \t", "\n", "b"});
  REQUIRE(pieces("Hello\u3000world") == Pieces{"Hello", "\u3000", "world"});
  REQUIRE(pieces("abc123") == Pieces{"abc", "123"});
  REQUIRE(pieces("$100.00!!") == Pieces{"$", "100", ".", "00", "!!"});
  REQUIRE(pieces("na\u00EFve caf\u00E9") == Pieces{"na\u00EFve", " caf\u00E9"});
  REQUIRE(pieces("a 1 \u00BD \u0663 \u216B") == Pieces{"a", " 1", " \u00BD", " \u0663", " \u216B"});
  REQUIRE(pieces("!!!?") == Pieces{"!!!?"});
  // Contractions are lower case only, and only where a piece starts.
  REQUIRE(pieces("'S") == Pieces{"'", "S"});
  REQUIRE(pieces("I'M") == Pieces{"I", "'", "M"});
  REQUIRE(pieces(" 's") == Pieces{" '", "s"});
  REQUIRE(pieces("don't  'll 've're'd") == Pieces{"don", "'t", " ", " '", "ll", " '", "ve", "'re", "'d"});
  REQUIRE(pieces("x\x1Cy") == Pieces{"x", "\x1C", "y"});
  // Bytes that are not UTF-8 are characters of class "other": they join punctuation.
  REQUIRE(pieces("\xFF\xFE" "abc") == Pieces{"\xFF\xFE", "abc"});
  REQUIRE(pieces(" \xC3(ab") == Pieces{" \xC3(", "ab"});  // a truncated sequence, then '('
  REQUIRE(pieces("").empty());
}

TEST_CASE("pretokenize: the naive regex matcher of the tests agrees on generated text", "[text]") {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    const std::string text = generated_text(rng, 1 + rng() % 30);
    std::vector<std::string> mine;
    for (const std::string_view p : pretokenize(text)) mine.emplace_back(p);
    INFO(text);
    REQUIRE(mine == naive_pieces(text));
  }
}

TEST_CASE("pretokenize: any bytes split into pieces that cover them exactly", "[text]") {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 500; ++trial) {
    const std::string bytes = random_bytes(rng, rng() % 64);
    std::string joined;
    for (const std::string_view p : pretokenize(bytes)) {
      REQUIRE(!p.empty());
      joined += p;
    }
    REQUIRE(joined == bytes);
  }
}

// ---- encoding and decoding -----------------------------------------------------------------------

TEST_CASE("encode: a hand-worked example of merge order", "[text]") {
  // The merges, by rank:  0: b b -> bb (256)   1: a b -> ab (257)   2: a a -> aa (258)   3: aa ab -> aaab (259).
  // Single bytes keep GPT-2's ids: 'a' 64, 'b' 65, 'Ġ' (a space) 220.
  //   "abb"    pairs (a,b) r1, (b,b) r0: the lowest is bb          -> a bb          = 64 256
  //   " aab"   Ġ a a b: (a,a) r2, (a,b) r1 -> Ġ a ab; nothing left  -> Ġ a ab        = 220 64 257
  //   " aaab"  Ġ a a a b: ab first -> Ġ a a ab; then aa -> Ġ aa ab; then aaab -> 220 259
  //   " aaa"   Ġ a a a: both (a,a) are rank 2; left to right the first two merge -> Ġ aa a = 220 258 64
  std::vector<std::string> tokens = byte_tokens();
  for (const char* t : {"bb", "ab", "aa", "aaab"}) tokens.emplace_back(t);
  const Tokenizer tokenizer(tokens, {{"b", "b"}, {"a", "b"}, {"a", "a"}, {"aa", "ab"}});
  const std::string text = "abb aab aaab aaa";
  const std::vector<TokenId> expected = {64, 256, 220, 64, 257, 220, 259, 220, 258, 64};
  REQUIRE(tokenizer.encode(text) == expected);
  REQUIRE(tokenizer.encode(text) == expected);  // again, through the piece cache
  REQUIRE(tokenizer.decode(expected) == text);
  REQUIRE(tokenizer.token(259) == "aaab");
  REQUIRE(tokenizer.token_bytes(220) == " ");
  REQUIRE(tokenizer.find("aa") == 258);
  REQUIRE(!tokenizer.find("ba").has_value());
  REQUIRE(!tokenizer.has_eot());
  REQUIRE_THROWS_WITH(tokenizer.eot_id(), Catch::Contains("has no <|endoftext|> token"));
  REQUIRE_THROWS_WITH(tokenizer.decode({64, 260}), Catch::Contains("no token has id 260"));
  REQUIRE_THROWS_WITH(tokenizer.decode({-1}), Catch::Contains("no token has id -1"));
}

TEST_CASE("encode: every occurrence of the chosen pair merges before the ranks are looked at again", "[text]") {
  // GPT-2's bpe() does so, and it shows with merges listed out of training order:
  //   0: ab a -> aba (256)   1: a b -> ab (257)
  //   "abab": (a,b) is the only pair with a rank -> both merge at once -> ab ab; (ab,ab) has none -> 257 257.
  // Merging one occurrence and looking again would find (ab,a) of rank 0 and make "aba" "b" instead.
  std::vector<std::string> tokens = byte_tokens();
  for (const char* t : {"aba", "ab"}) tokens.emplace_back(t);
  const Tokenizer tokenizer(tokens, {{"ab", "a"}, {"a", "b"}});
  REQUIRE(tokenizer.encode("abab") == std::vector<TokenId>{257, 257});
  REQUIRE(tokenizer.encode("aba") == std::vector<TokenId>{256});
  REQUIRE(NaiveBpe(tokenizer).encode("abab") == std::vector<TokenId>{257, 257});
}

TEST_CASE("merge table: short and long pieces merge as the naive loop does, merges in any order", "[text]") {
  // The naive loop: find the lowest rank among adjacent pairs, merge all its occurrences left to
  // right, repeat. MergeTable::apply() scans short pieces and queues long ones (kLongPiece tokens
  // and up); both must agree with it, also for merge lists out of training order, where a merge
  // uses a token that only a later-ranked merge makes.
  auto naive_apply = [](const MergeTable& table, const std::vector<std::pair<int32_t, int32_t>>& made_of,
                        std::vector<int32_t> ids) {
    while (true) {
      int32_t best = MergeTable::kNoMerge;
      for (size_t i = 0; i + 1 < ids.size(); ++i) best = std::min(best, table.rank_of(ids[i], ids[i + 1]));
      if (best == MergeTable::kNoMerge) return ids;
      std::vector<int32_t> merged;
      for (size_t i = 0; i < ids.size(); ++i) {
        if (i + 1 < ids.size() && table.rank_of(ids[i], ids[i + 1]) == best) {
          merged.push_back(made_of[size_t(best)].first);
          ++i;
        } else {
          merged.push_back(ids[i]);
        }
      }
      ids = merged;
    }
  };
  std::mt19937 rng(61);
  for (int trial = 0; trial < 40; ++trial) {
    // Tokens 0..2 are the alphabet; each rule joins two existing tokens into a new one, and then the
    // rules are ranked in a random order (so out of training order).
    struct Rule {
      int32_t left, right, merged;
    };
    std::vector<Rule> rules;
    int32_t next_id = 3;
    for (int k = 0; k < 30; ++k) {
      const int32_t left = int32_t(rng() % uint32_t(next_id)), right = int32_t(rng() % uint32_t(next_id));
      bool repeated = false;
      for (const Rule& r : rules) repeated |= r.left == left && r.right == right;
      if (!repeated) rules.push_back({left, right, next_id++});
    }
    if (trial % 2) std::shuffle(rules.begin(), rules.end(), rng);  // half in training order, half not
    MergeTable table;
    std::vector<std::pair<int32_t, int32_t>> made_of;  // by rank: (merged id, unused)
    for (const Rule& r : rules) {
      REQUIRE(table.add(r.left, r.right, r.merged));
      made_of.push_back({r.merged, 0});
    }
    REQUIRE(!table.add(rules[0].left, rules[0].right, 99));  // a pair merges at one rank only
    for (const size_t length : {size_t(2), size_t(7), MergeTable::kLongPiece - 1, MergeTable::kLongPiece, size_t(900)}) {
      std::vector<int32_t> ids(length);
      for (int32_t& id : ids) id = int32_t(rng() % (trial % 3 == 0 ? 2 : 3));  // two letters: long repeats
      std::vector<int32_t> applied = ids;
      table.apply(applied);
      INFO("trial " << trial << ", length " << length);
      REQUIRE(applied == naive_apply(table, made_of, ids));
    }
  }
}

TEST_CASE("encode: equals a naive greedy lowest-rank BPE written here, for a trained tokenizer", "[text]") {
  BpeTrainOptions options;
  options.vocab_size = 600;
  const Tokenizer tokenizer = train_bpe(generated_corpus(21, 40, 200), options);
  REQUIRE(tokenizer.vocab_size() == 600);
  const NaiveBpe naive(tokenizer);
  std::mt19937 other(22);  // text the tokenizer has not seen
  for (int trial = 0; trial < 200; ++trial) {
    const std::string text = generated_text(other, 1 + other() % 60);
    INFO(text);
    REQUIRE(tokenizer.encode(text) == naive.encode(text));
  }
  // Pieces long enough for the merge queue (MergeTable::kLongPiece): words glued together.
  for (int trial = 0; trial < 4; ++trial) {
    std::string word;
    while (word.size() < 700) word += std::vector<std::string>{"the", "merge", "tokenizer", "ing", "aab", "t"}[other() % 6];
    REQUIRE(tokenizer.encode(" " + word) == naive.encode(" " + word));
  }
}

TEST_CASE("encode/decode: any bytes round-trip, for a byte-only and a trained vocabulary", "[text]") {
  const Tokenizer bytes_only(byte_tokens(), {});
  std::mt19937 rng(31);  // the corpus first, then the inputs below
  BpeTrainOptions options;
  options.vocab_size = 400;
  const Tokenizer trained = train_bpe(generated_corpus(rng, 20, 200), options);
  for (int trial = 0; trial < 300; ++trial) {
    // Random bytes (mostly invalid UTF-8), text, and the two mixed, some with "<|endoftext|>".
    std::string input = trial % 3 == 0 ? random_bytes(rng, rng() % 80) : generated_text(rng, rng() % 30);
    if (trial % 3 == 2) input += random_bytes(rng, 5) + generated_text(rng, 3);
    if (trial % 5 == 0) input.insert(input.size() / 2, kEndOfText);
    INFO(trial);
    const std::vector<TokenId> ids = bytes_only.encode(input);
    REQUIRE(ids.size() == input.size());  // no merges: one token per byte
    REQUIRE(bytes_only.decode(ids) == input);
    const std::vector<TokenId> trained_ids = trained.encode(input);
    REQUIRE(trained.decode(trained_ids) == input);
    REQUIRE(trained.decode(trained.encode(input, SpecialText::as_token)) == input);
  }
}

TEST_CASE("encode: <|endoftext|> is text unless asked for, then the token", "[text]") {
  std::vector<std::string> tokens = byte_tokens();
  tokens.emplace_back(kEndOfText);
  const Tokenizer tokenizer(tokens, {});
  REQUIRE(tokenizer.eot_id() == 256);
  const std::string text = "a<|endoftext|>b";
  REQUIRE(tokenizer.encode(text).size() == text.size());  // 15 single bytes
  const std::vector<TokenId> with_token = {64, 256, 65};
  REQUIRE(tokenizer.encode(text, SpecialText::as_token) == with_token);
  REQUIRE(tokenizer.encode("<|endoftext|><|endoftext|>", SpecialText::as_token) == std::vector<TokenId>{256, 256});
  REQUIRE(tokenizer.decode(with_token) == text);
  const Tokenizer no_eot(byte_tokens(), {});
  REQUIRE_THROWS_WITH(no_eot.encode(text, SpecialText::as_token), Catch::Contains("no <|endoftext|> token"));
}

TEST_CASE("encode: GPT-2's own files give GPT-2's ids (set BRIGADE_GPT2_TOKENIZER)", "[.][gpt2]") {
  // Hidden: it needs GPT-2's vocab.json and merges.txt (or encoder.json and vocab.bpe), which are not
  // in the repository. `BRIGADE_GPT2_TOKENIZER=DIR build/tests/test_text '[gpt2]'`. The expected ids
  // are GPT-2's (checked against Hugging Face's tokenizers with GPT-2's files).
  const char* dir = std::getenv("BRIGADE_GPT2_TOKENIZER");
  REQUIRE(dir != nullptr);
  const Tokenizer gpt2 = load_tokenizer(dir);
  REQUIRE(gpt2.vocab_size() == 50257);
  REQUIRE(gpt2.eot_id() == 50256);
  REQUIRE(gpt2.encode("Hello world") == std::vector<TokenId>{15496, 995});
  REQUIRE(gpt2.encode("I'm sure it's   there, isn't it? You'll see!") ==
          std::vector<TokenId>{40, 1101, 1654, 340, 338, 220, 220, 612, 11, 2125, 470, 340, 30, 921, 1183, 766, 0});
  REQUIRE(gpt2.encode("na\u00EFve caf\u00E9 \u6771\u4EAC\n\n") ==
          std::vector<TokenId>{2616, 38776, 40304, 10545, 251, 109, 12859, 105, 628});
  REQUIRE(gpt2.encode("<|endoftext|>") == std::vector<TokenId>{27, 91, 437, 1659, 5239, 91, 29});
  REQUIRE(gpt2.encode("<|endoftext|>", SpecialText::as_token) == std::vector<TokenId>{50256});
  REQUIRE(gpt2.encode("    return x**2\n") == std::vector<TokenId>{220, 220, 220, 1441, 2124, 1174, 17, 198});
  const NaiveBpe naive(gpt2);
  std::mt19937 rng(41);
  for (int trial = 0; trial < 100; ++trial) {
    const std::string text = generated_text(rng, 1 + rng() % 40);
    REQUIRE(gpt2.encode(text) == naive.encode(text));
  }
}
