// The GPT-2 regex's alternatives (see pretokenize.h) in the order the regex tries them.
#include "text/pretokenize.h"

#include "core/utf8.h"
#include "text/unicode_classes.h"

namespace brigade::text {

namespace {

struct Char {
  CharClass kind;
  uint32_t length;  // bytes
  bool is_space_char;  // U+0020 itself, which the " ?" of three alternatives means
};

Char read(std::string_view text, size_t at) {
  const auto byte = static_cast<unsigned char>(text[at]);
  if (byte < 0x80) return {char_class(byte), 1, byte == ' '};
  const Utf8Char c = decode_utf8(text, at);
  if (!c.valid) return {CharClass::other, 1, false};  // an invalid byte: one character of its own
  return {char_class(c.code_point), c.length, false};
}

// The end of the run of characters of class `kind` that starts at `at`.
size_t end_of_run(std::string_view text, size_t at, CharClass kind) {
  while (at < text.size()) {
    const Char c = read(text, at);
    if (c.kind != kind) break;
    at += c.length;
  }
  return at;
}

// 's|'t|'re|'ve|'m|'ll|'d: the length of the contraction at `at`, or 0. Case matters: "'S" is not one.
size_t contraction_length(std::string_view text, size_t at) {
  if (text[at] != '\'') return 0;
  const std::string_view rest = text.substr(at + 1);
  for (const std::string_view suffix : {"s", "t", "re", "ve", "m", "ll", "d"})
    if (rest.substr(0, suffix.size()) == suffix) return 1 + suffix.size();
  return 0;
}

}  // namespace

size_t next_piece_end(std::string_view text, size_t start) {
  if (const size_t n = contraction_length(text, start)) return start + n;

  const Char first = read(text, start);
  // " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+": an optional U+0020, then a run of one class. The
  // three share a shape, and at most one can match here: the class of the character after the
  // optional space decides which.
  if (first.is_space_char && start + 1 < text.size()) {
    const Char second = read(text, start + 1);
    if (second.kind != CharClass::space) return end_of_run(text, start + 1, second.kind);
  }
  if (first.kind != CharClass::space) return end_of_run(text, start, first.kind);

  // "\s+(?!\S)", then "\s+". The greedy run of white space matches the first when the text ends
  // after it; otherwise a non-space follows, and the regex backs off one character — the run minus
  // its last character is followed by white space — which needs a run of two or more. A single white
  // space before a non-space falls through to the plain "\s+".
  size_t end = start, last = start;  // the run's end, and where its last character starts
  while (end < text.size()) {
    const Char c = read(text, end);
    if (c.kind != CharClass::space) break;
    last = end;
    end += c.length;
  }
  if (end == text.size()) return end;
  return last > start ? last : end;
}

std::vector<std::string_view> pretokenize(std::string_view text) {
  std::vector<std::string_view> pieces;
  for (size_t start = 0; start < text.size();) {
    const size_t end = next_piece_end(text, start);
    pieces.push_back(text.substr(start, end - start));
    start = end;
  }
  return pieces;
}

}  // namespace brigade::text
