// UTF-8: checking that bytes are well-formed, and encoding one code point.
//
// Names that leave the process — tensor names in a safetensors header, strings in any JSON file —
// must be valid UTF-8, or other tools refuse the file. The JSON reader (core/json.h) needs both
// halves: it checks every string it returns and encodes the code points of \u escapes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace brigade {

// True when `s` is well-formed UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF.
bool is_utf8(std::string_view s);

// Appends the UTF-8 encoding of `code_point` (at most U+10FFFF, not a surrogate) to `out`.
void append_utf8(std::string& out, uint32_t code_point);

}  // namespace brigade
