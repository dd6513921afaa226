// GPT-2's pre-tokeniser: text cut into pieces before BPE, so that no token spans two of them.
//
// GPT-2 finds its pieces with the regular expression
//
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// applied repeatedly: at each position the first alternative that matches wins, and it takes as
// much as it can. So a word keeps the space before it (" world"), digits and punctuation form runs
// of their own, English contractions ("'s", "'ll") split off — lower case only: "'S" is punctuation
// followed by a letter — and a run of white space gives its last character to the word after it
// ("a  b" is "a", " ", " b") unless the run ends the text.
//
// brigade has no regex engine; next_piece_end() implements exactly that match by hand over code
// points, with the classes of text/unicode_classes.h. Text that is not valid UTF-8 is still split:
// each byte that does not begin a well-formed UTF-8 sequence counts as one character of class
// `other` (not a letter, number or space), so it joins a punctuation run. The pieces always cover the
// input exactly, so any bytes survive encode() and decode() unchanged.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace brigade::text {

// The end (a byte offset) of the piece that starts at byte `start` of `text`; start < text.size().
// The piece is never empty.
size_t next_piece_end(std::string_view text, size_t start);

// All the pieces of `text`, in order; concatenated they are `text`.
std::vector<std::string_view> pretokenize(std::string_view text);

}  // namespace brigade::text
