#include "text/byte_alphabet.h"

#include "core/utf8.h"

namespace brigade::text {

namespace {

// Printable: a visible Latin-1 character that is not white space. The soft hyphen (0xAD) is left
// out too: it is invisible in most fonts.
bool printable(uint32_t byte) {
  return (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) || (byte >= 0xAE && byte <= 0xFF);
}

constexpr uint32_t kNonPrintable = 68;  // 256 - 188

struct Alphabet {
  std::array<uint32_t, 256> code_point{};
  std::array<uint8_t, kNonPrintable> from_extra{};  // the byte of U+0100 + k
  std::array<uint8_t, 256> order{};
};

const Alphabet& alphabet() {
  static const Alphabet a = [] {
    Alphabet out;
    uint32_t next_extra = 256;  // the non-printable bytes, in byte order, take U+0100 onwards
    size_t n = 0;
    for (uint32_t b = 0; b < 256; ++b) {
      if (!printable(b)) out.from_extra[next_extra - 256] = uint8_t(b);
      out.code_point[b] = printable(b) ? b : next_extra++;
      if (printable(b)) out.order[n++] = uint8_t(b);
    }
    for (uint32_t b = 0; b < 256; ++b)
      if (!printable(b)) out.order[n++] = uint8_t(b);
    return out;
  }();
  return a;
}

}  // namespace

uint32_t byte_to_code_point(uint8_t byte) { return alphabet().code_point[byte]; }

std::optional<uint8_t> code_point_to_byte(uint32_t cp) {
  if (cp < 256) return printable(cp) ? std::optional<uint8_t>(uint8_t(cp)) : std::nullopt;
  if (cp < 256 + kNonPrintable) return alphabet().from_extra[cp - 256];
  return std::nullopt;
}

std::string bytes_to_symbols(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) append_utf8(out, byte_to_code_point(static_cast<uint8_t>(c)));
  return out;
}

std::optional<std::string> symbols_to_bytes(std::string_view symbols) {
  std::string out;
  for (size_t i = 0; i < symbols.size();) {
    const Utf8Char c = decode_utf8(symbols, i);
    if (!c.valid) return std::nullopt;
    const std::optional<uint8_t> byte = code_point_to_byte(c.code_point);
    if (!byte) return std::nullopt;
    out += char(*byte);
    i += c.length;
  }
  return out;
}

const std::array<uint8_t, 256>& bytes_in_alphabet_order() { return alphabet().order; }

}  // namespace brigade::text
