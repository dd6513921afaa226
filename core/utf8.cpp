#include "core/utf8.h"

namespace brigade {

Utf8Char decode_utf8(std::string_view s, size_t at) {
  static constexpr uint32_t kSmallest[] = {0, 0x80, 0x800, 0x10000};  // per continuation-byte count
  const auto lead = static_cast<unsigned char>(s[at]);
  const Utf8Char invalid{lead, 1, false};
  uint32_t extra;  // continuation bytes after the lead byte
  uint32_t cp;
  if (lead < 0x80) return {lead, 1, true};
  if ((lead & 0xE0) == 0xC0) {
    extra = 1;
    cp = lead & 0x1F;
  } else if ((lead & 0xF0) == 0xE0) {
    extra = 2;
    cp = lead & 0x0F;
  } else if ((lead & 0xF8) == 0xF0) {
    extra = 3;
    cp = lead & 0x07;
  } else {
    return invalid;  // a continuation byte, or 0xF8..0xFF, which no sequence begins with
  }
  if (s.size() - at <= extra) return invalid;  // truncated sequence
  for (uint32_t k = 1; k <= extra; ++k) {
    const auto next = static_cast<unsigned char>(s[at + k]);
    if ((next & 0xC0) != 0x80) return invalid;
    cp = (cp << 6) | (next & 0x3F);
  }
  if (cp < kSmallest[extra] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return invalid;
  return {cp, extra + 1, true};
}

bool is_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const Utf8Char c = decode_utf8(s, i);
    if (!c.valid) return false;
    i += c.length;
  }
  return true;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

}  // namespace brigade
