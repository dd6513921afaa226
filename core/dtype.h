// DType: the element types a Tensor can hold, and the compile-time bridge from a DType to its C++
// type (so a kernel written once as a template runs for every type that makes sense for it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "core/half.h"

namespace brigade {

enum class DType : uint8_t { f32, f64, bf16, f16, i32, i64 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);  // "f32", "bf16", ...
DType dtype_from_name(const std::string& name);  // throws on unknown names
inline bool is_floating(DType t) { return t == DType::f32 || t == DType::f64 || t == DType::bf16 || t == DType::f16; }
inline bool is_half(DType t) { return t == DType::bf16 || t == DType::f16; }
inline bool is_integral(DType t) { return t == DType::i32 || t == DType::i64; }

// CType<DType::f32>::type == float, and so on.
template <DType T> struct CType;
template <> struct CType<DType::f32> { using type = float; };
template <> struct CType<DType::f64> { using type = double; };
template <> struct CType<DType::bf16> { using type = brigade::bf16; };
template <> struct CType<DType::f16> { using type = brigade::f16; };
template <> struct CType<DType::i32> { using type = int32_t; };
template <> struct CType<DType::i64> { using type = int64_t; };

// dtype_of<float>() == DType::f32, and so on.
template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<brigade::bf16>() { return DType::bf16; }
template <> constexpr DType dtype_of<brigade::f16>() { return DType::f16; }
template <> constexpr DType dtype_of<int32_t>() { return DType::i32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::i64; }

// Calls fn(T{}) with T the C++ type of `t` — the runtime-to-compile-time switch kernels use:
//   visit_dtype(x.dtype(), [&](auto tag) { using T = decltype(tag); ... });
template <class Fn>
decltype(auto) visit_dtype(DType t, Fn&& fn) {
  switch (t) {
    case DType::f32: return fn(float{});
    case DType::f64: return fn(double{});
    case DType::bf16: return fn(brigade::bf16{});
    case DType::f16: return fn(brigade::f16{});
    case DType::i32: return fn(int32_t{});
    case DType::i64: return fn(int64_t{});
  }
  fail("visit_dtype: invalid dtype ", int(t));
}

// The same, restricted to f32 and f64 (the types the CPU reference computes in; bf16/f16 inputs are
// widened to f32 by the op layer first). `op` names the caller in the error for other dtypes.
template <class Fn>
decltype(auto) visit_float(DType t, const char* op, Fn&& fn) {
  switch (t) {
    case DType::f32: return fn(float{});
    case DType::f64: return fn(double{});
    default: fail(op, ": expected a f32 or f64 tensor, got ", dtype_name(t));
  }
}

// Converts any element type to and from double / float.
template <class T> inline double to_double(T v) { return double(v); }
template <> inline double to_double(brigade::bf16 v) { return double(float(v)); }
template <> inline double to_double(brigade::f16 v) { return double(float(v)); }
template <class T> inline T from_double(double v) { return T(v); }
// One correct rounding from double to 16 bits (not two: see float_round_odd).
template <> inline brigade::bf16 from_double(double v) { return brigade::bf16(float_round_odd(v)); }
template <> inline brigade::f16 from_double(double v) { return brigade::f16(float_round_odd(v)); }

}  // namespace brigade
