// What the text/ tests share: generated text over a small, hand-classified set of characters; a
// naive GPT-2 pre-tokeniser and a naive BPE over it, written here independently of text/ as the
// reference the library is checked against; random bytes; scratch directories.
#pragma once

#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "text/tokenizer.h"

namespace text_test {

using brigade::text::TokenId;
using brigade::text::Tokenizer;

// ---- characters and their classes, by hand ----

// The only non-ASCII characters generated_text() uses, with their Unicode classes looked up by hand.
inline const std::vector<std::string> kExtraLetters = {"\u00E9", "\u00EF", "\u00DF", "\u0436", "\u03A3", "\u4E2D"};  // é ï ß ж Σ 中
inline const std::vector<std::string> kExtraNumbers = {"\u0663", "\u00B2", "\u00BD"};  // ٣ (Nd) ² (No) ½ (No)
inline const std::vector<std::string> kSpaces = {" ", "\n", "\t", "\u3000"};
inline const std::vector<std::string> kPunctuation = {".", ",", "!", "?", "'", "-", "\"", "(", ")", "\u20AC", "\u2014"};

enum class Kind { letter, number, space, other };

inline bool among(const std::vector<std::string>& set, const std::string& c) {
  for (const std::string& s : set)
    if (s == c) return true;
  return false;
}

inline Kind kind_of(const std::string& c) {
  if (c.size() == 1 && ((c[0] >= 'a' && c[0] <= 'z') || (c[0] >= 'A' && c[0] <= 'Z'))) return Kind::letter;
  if (c.size() == 1 && c[0] >= '0' && c[0] <= '9') return Kind::number;
  if (among(kExtraLetters, c)) return Kind::letter;
  if (among(kExtraNumbers, c)) return Kind::number;
  if (among(kSpaces, c)) return Kind::space;
  return Kind::other;
}

// Valid UTF-8 split into its characters (a character starts at every byte that is not 10xxxxxx).
inline std::vector<std::string> characters(const std::string& text) {
  std::vector<std::string> out;
  for (const char c : text) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80 || out.empty()) out.emplace_back();
    out.back() += c;
  }
  return out;
}

// Words, numbers, punctuation, contractions (some not: "'S", "'x") and white space of every kind.
inline std::string generated_text(std::mt19937& rng, int items) {
  static const std::vector<std::string> words = {
      "the", "of", "and", "to", "in", "is", "that", "it", "was", "for", "on", "are", "with", "as", "I", "his",
      "they", "be", "at", "one", "have", "this", "from", "token", "tokenizer", "merge", "merges", "byte", "pair",
      "na\u00EFve", "caf\u00E9", "stra\u00DFe", "\u0436\u0436", "\u03A3", "\u4E2D\u4E2D", "aab", "ing", "Hello"};
  static const std::vector<std::string> contractions = {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL", "'x"};
  static const std::vector<std::string> spaces = {" ", " ", " ", "  ", "   ", "\n", "\n\n", "\t", "\u3000", " \n"};
  auto pick = [&](const std::vector<std::string>& from) { return from[rng() % from.size()]; };
  std::string out;
  for (int i = 0; i < items; ++i) {
    if (rng() % 10 < 6) out += " ";
    switch (rng() % 8) {
      case 0: case 1: case 2: out += pick(words); break;
      case 3: {
        std::string w = pick(words);
        if (w[0] >= 'a' && w[0] <= 'z') w[0] = char(w[0] - 'a' + 'A');
        out += w;
        break;
      }
      case 4:
        for (uint32_t k = 0, n = 1 + rng() % 4; k < n; ++k)
          out += rng() % 4 ? std::string(1, char('0' + rng() % 10)) : pick(kExtraNumbers);
        break;
      case 5:
        for (uint32_t k = 0, n = 1 + rng() % 3; k < n; ++k) out += pick(kPunctuation);
        break;
      case 6: out += pick(contractions); break;
      default: out += pick(spaces); break;
    }
  }
  return out;
}

// A corpus of `documents` generated texts of `items` items each, drawn from `rng` in turn (a test
// that goes on drawing from it passes its own), or from a fresh generator seeded with `seed`.
inline std::vector<std::string> generated_corpus(std::mt19937& rng, int documents, int items) {
  std::vector<std::string> corpus;
  for (int i = 0; i < documents; ++i) corpus.push_back(generated_text(rng, items));
  return corpus;
}

inline std::vector<std::string> generated_corpus(uint32_t seed, int documents, int items) {
  std::mt19937 rng(seed);
  return generated_corpus(rng, documents, items);
}

// n random bytes: half of the strings any bytes at all, half mostly ASCII with stray high bytes.
inline std::string random_bytes(std::mt19937& rng, size_t n) {
  const bool any = rng() % 2;
  std::string out;
  for (size_t i = 0; i < n; ++i)
    out += any || rng() % 8 == 0 ? char(rng() % 256) : char(0x20 + rng() % 0x5F);
  return out;
}

// ---- the reference: GPT-2's regex, one alternative at a time ----

// GPT-2's pattern 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ matched
// the slow, literal way: each alternative in turn, each quantifier by backtracking, over the text's
// characters (only those kind_of() knows).
inline std::vector<std::string> naive_pieces(const std::string& text) {
  const std::vector<std::string> c = characters(text);
  const size_t n = c.size();
  auto is = [&](size_t i, Kind k) { return i < n && kind_of(c[i]) == k; };
  auto is_not = [&](size_t i, Kind k) { return i < n && kind_of(c[i]) != k; };
  // The alternatives: each gives the number of characters it matches at p, or 0 for no match.
  auto contraction = [&](size_t p) -> size_t {
    for (const std::string s : {"s", "t", "re", "ve", "m", "ll", "d"}) {
      if (c[p] != "'") return 0;
      bool match = p + s.size() < n;
      for (size_t k = 0; match && k < s.size(); ++k) match = c[p + 1 + k] == std::string(1, s[k]);
      if (match) return 1 + s.size();
    }
    return 0;
  };
  // " ?X+": the optional space is greedy, so first with it, then without.
  auto space_then_run = [&](size_t p, auto in_class) -> size_t {
    for (const size_t skip : {size_t(1), size_t(0)}) {
      if (skip == 1 && c[p] != " ") continue;
      size_t q = p + skip;
      while (q < n && in_class(q)) ++q;
      if (q > p + skip) return q - p;
    }
    return 0;
  };
  auto spaces_not_before_non_space = [&](size_t p) -> size_t {
    size_t q = p;
    while (is(q, Kind::space)) ++q;
    for (size_t e = q; e > p; --e)  // \s+ backs off one character at a time until (?!\S) holds
      if (e == n || is(e, Kind::space)) return e - p;
    return 0;
  };
  auto spaces = [&](size_t p) -> size_t {
    size_t q = p;
    while (is(q, Kind::space)) ++q;
    return q - p;
  };
  std::vector<std::string> pieces;
  for (size_t p = 0; p < n;) {
    size_t len = contraction(p);
    if (!len) len = space_then_run(p, [&](size_t i) { return is(i, Kind::letter); });
    if (!len) len = space_then_run(p, [&](size_t i) { return is(i, Kind::number); });
    if (!len)
      len = space_then_run(p, [&](size_t i) {
        return is_not(i, Kind::space) && is_not(i, Kind::letter) && is_not(i, Kind::number);
      });
    if (!len) len = spaces_not_before_non_space(p);
    if (!len) len = spaces(p);
    REQUIRE(len > 0);
    std::string piece;
    for (size_t k = p; k < p + len; ++k) piece += c[k];
    pieces.push_back(piece);
    p += len;
  }
  return pieces;
}

// ---- the reference: GPT-2's bpe(), on strings ----

// The byte alphabet's character for a byte, as UTF-8 — bytes_to_unicode written out once more.
inline std::string symbol_of(unsigned char byte) {
  uint32_t cp = byte, extra = 256;
  auto printable = [](uint32_t b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; };
  if (!printable(byte)) {
    for (uint32_t b = 0; b < byte; ++b) extra += !printable(b);
    cp = extra;
  }
  if (cp < 0x80) return std::string(1, char(cp));
  return {char(0xC0 | (cp >> 6)), char(0x80 | (cp & 0x3F))};
}

// The tokenizer's merges applied the slow way: find the adjacent pair of lowest rank, merge it
// everywhere left to right, repeat; then look each token up. Pieces come from naive_pieces().
class NaiveBpe {
 public:
  explicit NaiveBpe(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {
    for (size_t rank = 0; rank < tokenizer.merges().size(); ++rank) {
      const Tokenizer::Merge& m = tokenizer.merges()[rank];
      ranks_[{tokenizer.token(m.left), tokenizer.token(m.right)}] = rank;
    }
  }

  std::vector<TokenId> encode(const std::string& text) const {
    std::vector<TokenId> ids;
    for (const std::string& piece : naive_pieces(text)) {
      std::vector<std::string> word;
      for (const char b : piece) word.push_back(symbol_of(static_cast<unsigned char>(b)));
      while (word.size() > 1) {
        size_t best = SIZE_MAX;
        std::pair<std::string, std::string> pair;
        for (size_t i = 0; i + 1 < word.size(); ++i) {
          const auto it = ranks_.find({word[i], word[i + 1]});
          if (it != ranks_.end() && it->second < best) {
            best = it->second;
            pair = it->first;
          }
        }
        if (best == SIZE_MAX) break;
        std::vector<std::string> merged;
        for (size_t i = 0; i < word.size(); ++i) {
          if (i + 1 < word.size() && word[i] == pair.first && word[i + 1] == pair.second) {
            merged.push_back(word[i] + word[i + 1]);
            ++i;
          } else {
            merged.push_back(word[i]);
          }
        }
        word = merged;
      }
      for (const std::string& token : word) {
        const std::optional<TokenId> id = tokenizer_.find(token);
        REQUIRE(id.has_value());
        ids.push_back(*id);
      }
    }
    return ids;
  }

 private:
  const Tokenizer& tokenizer_;
  std::map<std::pair<std::string, std::string>, size_t> ranks_;
};

// The 256 single-byte tokens in GPT-2's order (ids 0..255), spelled with symbol_of().
inline std::vector<std::string> byte_tokens() {
  std::vector<std::string> tokens;
  for (int pass = 0; pass < 2; ++pass)  // the printable bytes, then the others
    for (int b = 0; b < 256; ++b) {
      const std::string s = symbol_of(static_cast<unsigned char>(b));
      const bool printable = !(s.size() == 2 && static_cast<unsigned char>(s[0]) >= 0xC4);  // U+0100 and up
      if (printable == (pass == 0)) tokens.push_back(s);
    }
  return tokens;
}

// A scratch directory, removed at the end of the test.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    static int counter = 0;
    path = std::filesystem::temp_directory_path() /
           ("brigade-text-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

}  // namespace text_test
