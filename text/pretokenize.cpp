// Each regex's alternatives (see pretokenize.h) in the order the regex tries them.
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

bool is_line_break(std::string_view text, size_t at) { return text[at] == '\r' || text[at] == '\n'; }

// 's|'t|'re|'ve|'m|'ll|'d: the length of the contraction at `at`, or 0. GPT-2's is case sensitive
// ("'S" is not one); LLaMA 3's (?i:...) is not, and under Unicode case folding its 's also matches
// U+017F LATIN SMALL LETTER LONG S.
size_t contraction_length(std::string_view text, size_t at, bool any_case) {
  if (text[at] != '\'') return 0;
  const std::string_view rest = text.substr(at + 1);
  if (any_case && rest.substr(0, 2) == "\u017F") return 3;
  for (const std::string_view suffix : {"s", "t", "re", "ve", "m", "ll", "d"}) {
    if (rest.size() < suffix.size()) continue;
    bool same = true;
    for (size_t i = 0; i < suffix.size(); ++i) {
      const char c = rest[i];
      same = same && (c == suffix[i] || (any_case && c == suffix[i] - 'a' + 'A'));
    }
    if (same) return 1 + suffix.size();
  }
  return 0;
}

// The white space at `start` (a space character): "\s+(?!\S)", then "\s+". The greedy run of white
// space matches the first when the text ends after it; otherwise a non-space follows, and the regex
// backs off one character — the run minus its last character is followed by white space — which
// needs a run of two or more. A single white space before a non-space falls through to the plain
// "\s+". With `through_line_breaks` (LLaMA 3's "\s*[\r\n]+", tried first), a run holding a line
// break ends just after its last one.
size_t white_space_end(std::string_view text, size_t start, bool through_line_breaks) {
  size_t end = start, last = start, after_break = 0;  // the run's end, where its last character starts
  while (end < text.size()) {
    const Char c = read(text, end);
    if (c.kind != CharClass::space) break;
    last = end;
    end += c.length;
    if (is_line_break(text, last)) after_break = end;
  }
  if (through_line_breaks && after_break > 0) return after_break;
  if (end == text.size()) return end;
  return last > start ? last : end;
}

size_t gpt2_piece_end(std::string_view text, size_t start) {
  if (const size_t n = contraction_length(text, start, /*any_case=*/false)) return start + n;

  const Char first = read(text, start);
  // " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+": an optional U+0020, then a run of one class. The
  // three share a shape, and at most one can match here: the class of the character after the
  // optional space decides which.
  if (first.is_space_char && start + 1 < text.size()) {
    const Char second = read(text, start + 1);
    if (second.kind != CharClass::space) return end_of_run(text, start + 1, second.kind);
  }
  if (first.kind != CharClass::space) return end_of_run(text, start, first.kind);
  return white_space_end(text, start, /*through_line_breaks=*/false);
}

// LLaMA 3's and Qwen2's: they differ only in how many digits a number piece takes.
size_t llama3_piece_end(std::string_view text, size_t start, int max_digits) {
  if (const size_t n = contraction_length(text, start, /*any_case=*/true)) return start + n;

  // "[^\r\n\p{L}\p{N}]?\p{L}+": a run of letters, with one character before it that is none of those.
  const Char first = read(text, start);
  if (first.kind == CharClass::letter) return end_of_run(text, start, CharClass::letter);
  const size_t next = start + first.length;
  if (first.kind != CharClass::number && !is_line_break(text, start) && next < text.size() &&
      read(text, next).kind == CharClass::letter)
    return end_of_run(text, next, CharClass::letter);

  // "\p{N}{1,3}" (Qwen2: "\p{N}").
  if (first.kind == CharClass::number) {
    size_t end = start;
    for (int digits = 0; digits < max_digits && end < text.size(); ++digits) {
      const Char c = read(text, end);
      if (c.kind != CharClass::number) break;
      end += c.length;
    }
    return end;
  }

  // " ?[^\s\p{L}\p{N}]+[\r\n]*": punctuation, with a U+0020 before it and the line breaks after it.
  size_t run = start;
  if (first.is_space_char && next < text.size() && read(text, next).kind == CharClass::other) run = next;
  if (read(text, run).kind == CharClass::other) {
    size_t end = end_of_run(text, run, CharClass::other);
    while (end < text.size() && is_line_break(text, end)) ++end;
    return end;
  }

  // "\s*[\r\n]+", "\s+(?!\S)", "\s+": `first` is white space.
  return white_space_end(text, start, /*through_line_breaks=*/true);
}

constexpr std::string_view kGpt2Regex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr SplitPattern kAllPatterns[] = {SplitPattern::gpt2, SplitPattern::llama3, SplitPattern::qwen2};

}  // namespace

std::string_view split_pattern_regex(SplitPattern pattern) {
  switch (pattern) {
    case SplitPattern::gpt2: return kGpt2Regex;
    case SplitPattern::llama3: return kLlama3Regex;
    case SplitPattern::qwen2: return kQwen2Regex;
  }
  return {};
}

std::optional<SplitPattern> split_pattern_named(std::string_view regex) {
  for (const SplitPattern p : kAllPatterns)
    if (split_pattern_regex(p) == regex) return p;
  return std::nullopt;
}

std::string_view split_pattern_name(SplitPattern pattern) {
  switch (pattern) {
    case SplitPattern::gpt2: return "gpt2";
    case SplitPattern::llama3: return "llama3";
    case SplitPattern::qwen2: return "qwen2";
  }
  return {};
}

size_t next_piece_end(std::string_view text, size_t start, SplitPattern pattern) {
  switch (pattern) {
    case SplitPattern::gpt2: return gpt2_piece_end(text, start);
    case SplitPattern::llama3: return llama3_piece_end(text, start, 3);
    case SplitPattern::qwen2: return llama3_piece_end(text, start, 1);
  }
  return text.size();
}

std::vector<std::string_view> pretokenize(std::string_view text, SplitPattern pattern) {
  std::vector<std::string_view> pieces;
  for (size_t start = 0; start < text.size();) {
    const size_t end = next_piece_end(text, start, pattern);
    pieces.push_back(text.substr(start, end - start));
    start = end;
  }
  return pieces;
}

}  // namespace brigade::text
