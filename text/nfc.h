// Unicode Normalization Form C, for tokenizers that normalise text before they split it (Qwen2's
// tokenizer.json names the NFC normalizer).
//
// The same text can be spelled with different code points: "é" as U+00E9, or as "e" followed by the
// combining acute U+0301. NFC picks one spelling: decompose every character canonically (and
// recursively: U+1E69 is U+1E63 U+0307 is s U+0323 U+0307), put each run of combining marks in
// canonical order (a stable sort by canonical combining class), then compose each mark with the
// starter before it where a primary composite exists and no mark between them blocks it. Hangul
// syllables decompose and compose by arithmetic. The tables (text/unicode_combining.cpp, text/unicode_nfc.cpp) are generated
// from Python's Unicode database by scripts/gen_unicode_nfc.py, as the pre-tokeniser's classes are
// (text/unicode_classes.h), and from the same Unicode version.
//
// Bytes that are not valid UTF-8 are kept as they are, each one a starter of its own (nothing
// composes across it). ASCII text is its own NFC and is returned at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace brigade::text {

// `text` in NFC.
std::string nfc(std::string_view text);

// The canonical combining class of `code_point` (0 for a starter).
uint8_t combining_class(uint32_t code_point);

// The generated tables (scripts/gen_unicode_nfc.py: unicode_combining.cpp, unicode_nfc.cpp), each
// sorted by code point.
struct CombiningClassRange {
  uint32_t first, last;
  uint8_t combining_class;
};
struct SingleDecomposition {  // never composed back (NFC excludes singletons)
  uint32_t code_point, target;
};
struct PairDecomposition {
  uint32_t code_point, first, second;
};
extern const CombiningClassRange kCombiningClassRanges[];
extern const size_t kCombiningClassRangesCount;
extern const SingleDecomposition kSingleDecompositions[];
extern const size_t kSingleDecompositionsCount;
extern const PairDecomposition kPairDecompositions[];
extern const size_t kPairDecompositionsCount;
// The pairs NFC does not compose back; every other pair is a primary composite.
extern const uint32_t kCompositionExclusions[];
extern const size_t kCompositionExclusionsCount;

}  // namespace brigade::text
