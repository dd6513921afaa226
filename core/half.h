// 16-bit floats stored as raw bits: bfloat16 (8-bit exponent, 7-bit mantissa) and IEEE half.
//
// Conversions from float round to nearest, ties to even — the same rule the GPU's cvt instructions
// use, so CPU and CUDA produce identical 16-bit values. Arithmetic always happens in float.
#pragma once

#include <cstdint>
#include <cstring>

namespace brigade {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// double -> float rounded to ODD (inexact results get their last bit set). Narrowing that float
// to bf16/f16 afterwards then rounds exactly as a single correct rounding from the double would:
// the odd bit stands in for everything the first step dropped, so no false ties appear.
inline float float_round_odd(double v) {
  float f = float(v);
  if (double(f) == v || v != v) return f;
  uint32_t u = float_bits(f);
  if ((f < 0 ? -double(f) : double(f)) > (v < 0 ? -v : v)) --u;  // rounded away from zero: step back
  return bits_float(u | 1u);
}

struct bf16 {
  uint16_t bits = 0;
  bf16() = default;
  explicit bf16(float f) : bits(from_float(f)) {}
  explicit operator float() const { return bits_float(uint32_t(bits) << 16); }

  static uint16_t from_float(float f) {
    uint32_t u = float_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN, keep sign
    // Add half an ulp of the result, plus one if the kept lsb is odd: ties go to even.
    uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
    return uint16_t((u + rounding) >> 16);
  }
};

struct f16 {
  uint16_t bits = 0;
  f16() = default;
  explicit f16(float f) : bits(from_float(f)) {}
  explicit operator float() const { return to_float(bits); }

  static uint16_t from_float(float f) {
    uint32_t u = float_bits(f);
    uint16_t sign = uint16_t((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u);       // NaN
    if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);      // rounds to >= 65520: infinity
    if (a >= 0x38800000u) {                                     // normal half (|f| >= 2^-14)
      uint32_t mant = a & 0x7fffffu;
      uint32_t exp = (a >> 23) - 127 + 15;
      uint32_t h = (exp << 10) | (mant >> 13);
      uint32_t rest = mant & 0x1fffu;                           // the 13 bits dropped
      if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h; // carries into exponent correctly
      return uint16_t(sign | h);
    }
    if (a < 0x33000000u) return sign;                           // below half the smallest subnormal
    // Subnormal half: value = m * 2^-24. Shift the full 24-bit significand into place.
    uint32_t mant = (a & 0x7fffffu) | 0x800000u;
    int shift = 126 - int(a >> 23);                             // 14..24 for this range
    uint32_t h = mant >> shift;
    uint32_t rest = mant & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (h & 1u))) ++h;
    return uint16_t(sign | h);
  }

  static float to_float(uint16_t h) {
    uint32_t sign = uint32_t(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (mant << 13));  // inf / NaN
    if (exp == 0) {
      if (mant == 0) return bits_float(sign);
      float f = float(mant) * (1.0f / 16777216.0f);  // exact: m * 2^-24
      return sign ? -f : f;
    }
    return bits_float(sign | ((exp - 15 + 127) << 23) | (mant << 13));
  }
};

}  // namespace brigade
