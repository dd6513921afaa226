// The pre-tokenisers: text cut into pieces before BPE, so that no token spans two of them.
//
// Each is a regular expression applied repeatedly: at each position the first alternative that
// matches wins, and it takes as much as it can. brigade has no regex engine; next_piece_end()
// implements each known expression exactly, by hand over code points, with the classes of
// text/unicode_classes.h (\p{L} letter, \p{N} number, \s space). Hugging Face's tokenizer.json names
// the expression by its text (text/tokenizer_json.h); split_pattern_named() recognises these three:
//
// GPT-2 (also what a ByteLevel pre-tokenizer with use_regex applies):
//
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
//   A word keeps the space before it (" world"), digits and punctuation form runs of their own,
//   English contractions ("'s", "'ll") split off — lower case only: "'S" is punctuation followed by
//   a letter — and a run of white space gives its last character to the word after it ("a  b" is
//   "a", " ", " b") unless the run ends the text.
//
// LLaMA 3 (and OpenAI's cl100k):
//
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
//   Contractions in any case ("'S", "'LL"); a word takes one character before it of any kind but a
//   line break, letter or number ("(word", ".Word", "\tword", " word"); numbers in runs of at most
//   three digits ("12345" is "123", "45"); punctuation keeps the line breaks after it ("};\n");
//   white space up to and including its last line break is one piece.
//
// Qwen2: LLaMA 3's with \p{N} in place of \p{N}{1,3}: every digit is a piece of its own.
//
// Text that is not valid UTF-8 is still split: each byte that does not begin a well-formed UTF-8
// sequence counts as one character of class `other` (not a letter, number or space). The pieces
// always cover the input exactly, so any bytes survive encode() and decode() unchanged.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

namespace brigade::text {

enum class SplitPattern {
  gpt2,
  llama3,
  qwen2,
};

// The regular expression's text, exactly as tokenizer.json spells it (after JSON unescaping).
std::string_view split_pattern_regex(SplitPattern pattern);
// The pattern whose text is `regex`, or nothing when it is none of the three.
std::optional<SplitPattern> split_pattern_named(std::string_view regex);
// "gpt2", "llama3", "qwen2": for messages and reports.
std::string_view split_pattern_name(SplitPattern pattern);

// The end (a byte offset) of the piece that starts at byte `start` of `text`; start < text.size().
// The piece is never empty.
size_t next_piece_end(std::string_view text, size_t start, SplitPattern pattern = SplitPattern::gpt2);

// All the pieces of `text`, in order; concatenated they are `text`.
std::vector<std::string_view> pretokenize(std::string_view text, SplitPattern pattern = SplitPattern::gpt2);

}  // namespace brigade::text
