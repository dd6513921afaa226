#include "core/dtype.h"

namespace brigade {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::bf16: return 2;
    case DType::f16: return 2;
    case DType::i32: return 4;
    case DType::i64: return 8;
  }
  fail("dtype_size: invalid dtype ", int(t));
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
  }
  return "invalid";
}

DType dtype_from_name(const std::string& name) {
  for (DType t : {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i32, DType::i64})
    if (name == dtype_name(t)) return t;
  fail("unknown dtype '", name, "' (expected f32, f64, bf16, f16, i32 or i64)");
}

}  // namespace brigade
