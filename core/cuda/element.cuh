// Element conversions inside CUDA kernels, bit for bit the CPU's (core/half.h, core/dtype.h).
//
// The CPU converts every pair of dtypes through double (exact for every value brigade stores), then
// rounds once to the destination. These are the same steps written with device intrinsics, so a
// tensor converted on a GPU holds exactly the bits the CPU would produce — including NaN payloads,
// which CUDA's own __float2bfloat16 / __float2half would canonicalise.
//
// Always call them qualified (element::to_double): unqualified calls would also find the host-only
// brigade::to_double through argument-dependent lookup on bf16/f16.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/dtype.h"

namespace brigade::cuda::element {

// ---- 16-bit floats, as in core/half.h ----

__device__ inline float bf16_to_float(uint16_t bits) { return __uint_as_float(uint32_t(bits) << 16); }

__device__ inline uint16_t float_to_bf16(float f) {
  const uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN, keep sign
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);                 // nearest, ties to even
}

__device__ inline float f16_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return __uint_as_float(sign | 0x7f800000u | (mant << 13));  // inf / NaN
  if (exp == 0) {
    const float f = float(mant) * (1.0f / 16777216.0f);  // subnormal: exactly m * 2^-24
    return sign ? -f : f;
  }
  return __uint_as_float(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

__device__ inline uint16_t float_to_f16(float f) {
  const uint32_t u = __float_as_uint(f);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u);   // NaN
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to >= 65520: infinity
  if (a >= 0x38800000u) {                                 // normal half
    uint32_t h = (((a >> 23) - 127 + 15) << 10) | ((a & 0x7fffffu) >> 13);
    const uint32_t rest = a & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
    return uint16_t(sign | h);
  }
  if (a < 0x33000000u) return sign;  // below half the smallest subnormal
  const uint32_t mant = (a & 0x7fffffu) | 0x800000u;
  const int shift = 126 - int(a >> 23);
  uint32_t h = mant >> shift;
  const uint32_t rest = mant & ((1u << shift) - 1), halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (h & 1u))) ++h;
  return uint16_t(sign | h);
}

// double -> float rounded to odd, so that narrowing on to 16 bits rounds once (see core/half.h).
__device__ inline float float_round_odd(double v) {
  const float f = __double2float_rn(v);
  if (double(f) == v || v != v) return f;
  uint32_t u = __float_as_uint(f);
  if (fabs(double(f)) > fabs(v)) --u;  // rounded away from zero: step back towards it
  return __uint_as_float(u | 1u);
}

// ---- any dtype <-> double, as to_double / from_double in core/dtype.h ----

template <class T>
__device__ inline double to_double(T v) {
  if constexpr (std::is_same_v<T, bf16>) return double(bf16_to_float(v.bits));
  else if constexpr (std::is_same_v<T, f16>) return double(f16_to_float(v.bits));
  else return double(v);  // exact for float and i32; round to nearest for i64 beyond 2^53
}

template <class T>
__device__ inline T from_double(double v) {
  if constexpr (std::is_same_v<T, bf16>) {
    T out;
    out.bits = float_to_bf16(float_round_odd(v));
    return out;
  } else if constexpr (std::is_same_v<T, f16>) {
    T out;
    out.bits = float_to_f16(float_round_odd(v));
    return out;
  } else if constexpr (std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>) {
    // Truncation. Out-of-range values and NaN are undefined in C++; x86 CPUs return the lowest
    // value for them (PTX would saturate), so the GPU does the same and both devices agree.
    const bool in_range = std::is_same_v<T, int32_t> ? (v > -2147483649.0 && v < 2147483648.0)
                                                     : (v >= -9223372036854775808.0 && v < 9223372036854775808.0);
    if (!in_range) return std::is_same_v<T, int32_t> ? T(INT32_MIN) : T(INT64_MIN);
    return T(v);
  } else {
    return T(v);  // float (nearest, ties to even) or double
  }
}

// One element of dtype S converted to D, exactly as cpu::copy does.
template <class D, class S>
__device__ inline D convert(S v) {
  if constexpr (std::is_same_v<D, S>) return v;
  else return element::from_double<D>(element::to_double(v));
}

}  // namespace brigade::cuda::element
