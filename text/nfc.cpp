#include "text/nfc.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "core/utf8.h"

namespace brigade::text {

namespace {

// A byte that is not valid UTF-8 is carried through as this plus its value: beyond Unicode, so it
// has no decomposition, no composition and class 0.
constexpr uint32_t kByteBase = 0x110000;

// Hangul syllables: S = SBase + (L * VCount + V) * TCount + T (The Unicode Standard, section 3.12).
constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

void decompose(uint32_t cp, std::vector<uint32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const uint32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out.push_back(kTBase + s % kTCount);
    return;
  }
  // The entry of `cp` in one of the sorted tables, or null.
  const auto find = [cp](const auto* table, size_t count) {
    const auto* end = table + count;
    const auto* d = std::lower_bound(table, end, cp, [](const auto& x, uint32_t v) { return x.code_point < v; });
    return d != end && d->code_point == cp ? d : nullptr;
  };
  if (const SingleDecomposition* d = find(kSingleDecompositions, kSingleDecompositionsCount)) {
    decompose(d->target, out);
  } else if (const PairDecomposition* p = find(kPairDecompositions, kPairDecompositionsCount)) {
    decompose(p->first, out);
    decompose(p->second, out);
  } else {
    out.push_back(cp);
  }
}

// The primary composites, (first, second) -> composite sorted by the pair: the pair decompositions
// less the exclusions, made once.
struct Composition {
  uint32_t first, second, composite;
};
const std::vector<Composition>& compositions() {
  static const std::vector<Composition> table = [] {
    std::vector<Composition> t;
    const uint32_t* excluded_end = kCompositionExclusions + kCompositionExclusionsCount;
    for (size_t i = 0; i < kPairDecompositionsCount; ++i) {
      const PairDecomposition& p = kPairDecompositions[i];
      if (!std::binary_search(kCompositionExclusions, excluded_end, p.code_point))
        t.push_back({p.first, p.second, p.code_point});
    }
    std::sort(t.begin(), t.end(), [](const Composition& x, const Composition& y) {
      return std::make_pair(x.first, x.second) < std::make_pair(y.first, y.second);
    });
    return t;
  }();
  return table;
}

std::optional<uint32_t> compose(uint32_t first, uint32_t second) {
  if (first >= kLBase && first < kLBase + kLCount && second >= kVBase && second < kVBase + kVCount)
    return kSBase + ((first - kLBase) * kVCount + (second - kVBase)) * kTCount;
  if (first >= kSBase && first < kSBase + kSCount && (first - kSBase) % kTCount == 0 && second > kTBase &&
      second < kTBase + kTCount)
    return first + (second - kTBase);
  const std::vector<Composition>& table = compositions();
  const auto end = table.end();
  const auto c = std::lower_bound(table.begin(), end, std::make_pair(first, second),
                                          [](const Composition& x, const std::pair<uint32_t, uint32_t>& v) {
                                            return std::make_pair(x.first, x.second) < v;
                                          });
  if (c == end || c->first != first || c->second != second) return std::nullopt;
  return c->composite;
}

}  // namespace

uint8_t combining_class(uint32_t code_point) {
  const CombiningClassRange* end = kCombiningClassRanges + kCombiningClassRangesCount;
  const CombiningClassRange* r = std::lower_bound(
      kCombiningClassRanges, end, code_point, [](const CombiningClassRange& x, uint32_t v) { return x.last < v; });
  return r != end && r->first <= code_point ? r->combining_class : 0;
}

std::string nfc(std::string_view text) {
  if (std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; }))
    return std::string(text);

  std::vector<uint32_t> cps;
  cps.reserve(text.size());
  for (size_t at = 0; at < text.size();) {
    const Utf8Char c = decode_utf8(text, at);
    if (c.valid) decompose(c.code_point, cps);
    else cps.push_back(kByteBase + static_cast<unsigned char>(text[at]));
    at += c.length;
  }

  // Canonical order: each run of marks (class > 0) sorted by class, stably.
  for (size_t i = 0; i < cps.size();) {
    if (combining_class(cps[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < cps.size() && combining_class(cps[j]) != 0) ++j;
    std::stable_sort(cps.begin() + long(i), cps.begin() + long(j),
                     [](uint32_t a, uint32_t b) { return combining_class(a) < combining_class(b); });
    i = j;
  }

  // Composition: each character joins the last starter when a composite exists and nothing between
  // blocks it — nothing there at all, or only marks of a lower class (the marks are in class order,
  // so the last one kept has the highest).
  size_t kept = 0, starter = 0;
  bool have_starter = false;
  uint8_t last_class = 0;
  for (const uint32_t c : cps) {
    const uint8_t cc = combining_class(c);
    if (have_starter && (kept == starter + 1 || last_class < cc)) {
      if (const std::optional<uint32_t> composite = compose(cps[starter], c)) {
        cps[starter] = *composite;
        continue;
      }
    }
    cps[kept++] = c;
    if (cc == 0) {
      have_starter = true;
      starter = kept - 1;
    }
    last_class = cc;
  }

  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < kept; ++i) {
    if (cps[i] >= kByteBase) out += char(cps[i] - kByteBase);
    else append_utf8(out, cps[i]);
  }
  return out;
}

}  // namespace brigade::text
