#include "core/format.h"

#include <cstdio>

namespace brigade {

std::string with_commas(int64_t n) {
  const std::string digits = std::to_string(n);
  const size_t sign = n < 0 ? 1 : 0;
  std::string out = digits.substr(0, sign);
  for (size_t i = sign; i < digits.size(); ++i) {
    if (i > sign && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

namespace {

// printf of one double with a precision, into a string of exactly the right length.
std::string print_double(const char* format, int precision, double v) {
  const int n = std::snprintf(nullptr, 0, format, precision, v);
  std::string out(size_t(n), '\0');
  std::snprintf(out.data(), out.size() + 1, format, precision, v);  // the terminator lands on out[n]
  return out;
}

}  // namespace

std::string format_fixed(double v, int decimals) { return print_double("%.*f", decimals, v); }

std::string format_significant(double v, int digits) { return print_double("%.*g", digits, v); }

std::string format_bytes(double bytes, int decimals) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  constexpr int kLast = int(sizeof kUnits / sizeof kUnits[0]) - 1;
  int unit = 0;
  while (bytes >= 1024 && unit < kLast) {
    bytes /= 1024;
    ++unit;
  }
  return format_fixed(bytes, unit == 0 ? 0 : decimals) + " " + kUnits[unit];
}

}  // namespace brigade
