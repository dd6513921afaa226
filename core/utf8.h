// UTF-8: checking that bytes are well-formed, decoding and encoding one code point.
//
// Names that leave the process — tensor names in a safetensors header, strings in any JSON file —
// must be valid UTF-8, or other tools refuse the file. The JSON reader (core/json.h) checks every
// string it returns and encodes the code points of \u escapes; the tokenizer's pre-tokeniser
// (text/pretokenize.h) walks text one code point at a time, stepping over bytes that are not UTF-8.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace brigade {

// One code point read from `s` at byte `at` (which must be < s.size()). A byte that does not begin a
// well-formed sequence — a stray continuation byte, a truncated sequence, an overlong form, a
// surrogate, a value above U+10FFFF — gives valid = false, length 1 and that byte's value as
// code_point (which is then not a character), so a reader can step over it and go on.
struct Utf8Char {
  uint32_t code_point;
  uint32_t length;  // bytes, 1 to 4
  bool valid;
};
Utf8Char decode_utf8(std::string_view s, size_t at);

// True when `s` is well-formed UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF.
bool is_utf8(std::string_view s);

// Appends the UTF-8 encoding of `code_point` (at most U+10FFFF, not a surrogate) to `out`.
void append_utf8(std::string& out, uint32_t code_point);

}  // namespace brigade
