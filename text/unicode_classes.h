// The Unicode classes GPT-2's pre-tokeniser splits by: letters, numbers, white space, and the rest.
//
// GPT-2's regex (text/pretokenize.h) names \p{L}, \p{N} and \s. brigade has no regex engine, so the
// classes are data: sorted code-point ranges generated once from Python's Unicode database by
// scripts/gen_unicode_classes.py (which says exactly what each class holds), committed as
// unicode_classes.cpp, and looked up by binary search. The classes are disjoint, so one code point
// has exactly one CharClass.
#pragma once

#include <cstddef>
#include <cstdint>

namespace brigade::text {

enum class CharClass : uint8_t {
  letter,  // \p{L}: Lu Ll Lt Lm Lo
  number,  // \p{N}: Nd Nl No
  space,   // \s: White_Space
  other,   // everything else, unassigned code points and (text/pretokenize.h) invalid UTF-8 bytes included
};

// The class of `code_point` (any value; above U+10FFFF is `other`).
CharClass char_class(uint32_t code_point);

// The generated tables (unicode_classes.cpp): inclusive ranges, sorted and disjoint.
struct CodePointRange {
  uint32_t first, last;
};
extern const CodePointRange kLetterRanges[];
extern const size_t kLetterRangesCount;
extern const CodePointRange kNumberRanges[];
extern const size_t kNumberRangesCount;
extern const CodePointRange kSpaceRanges[];
extern const size_t kSpaceRangesCount;

}  // namespace brigade::text
