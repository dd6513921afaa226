// char_class(): a binary search in the generated tables, with ASCII answered from a small table
// first — nearly every code point of English text or source code is ASCII, and the pre-tokeniser
// asks once per code point.
#include <algorithm>
#include <array>

#include "text/unicode_classes.h"

namespace brigade::text {

namespace {

bool in_ranges(const CodePointRange* ranges, size_t count, uint32_t cp) {
  const CodePointRange* end = ranges + count;
  // The first range whose last code point is >= cp: cp is in the table exactly when it is in that one.
  const CodePointRange* r = std::lower_bound(ranges, end, cp, [](const CodePointRange& range, uint32_t value) {
    return range.last < value;
  });
  return r != end && r->first <= cp;
}

CharClass lookup(uint32_t cp) {
  if (in_ranges(kLetterRanges, kLetterRangesCount, cp)) return CharClass::letter;
  if (in_ranges(kNumberRanges, kNumberRangesCount, cp)) return CharClass::number;
  if (in_ranges(kSpaceRanges, kSpaceRangesCount, cp)) return CharClass::space;
  return CharClass::other;
}

// Built from the same tables, so ASCII cannot disagree with the rest.
const std::array<CharClass, 128> kAscii = [] {
  std::array<CharClass, 128> table{};
  for (uint32_t cp = 0; cp < 128; ++cp) table[cp] = lookup(cp);
  return table;
}();

}  // namespace

CharClass char_class(uint32_t code_point) { return code_point < 128 ? kAscii[code_point] : lookup(code_point); }

}  // namespace brigade::text
