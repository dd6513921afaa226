// The emulated NCCL's data types and reductions, and the names its messages use.
//
// Written from the NCCL User Guide's "Types" (ncclDataType_t, ncclRedOp_t) and "Collective
// Operations" (ncclAvg: the average over the ranks), and ncclAvg's arithmetic from NCCL's source
// (reduce_as). Every rank reduces the same contributions in the same order (rank 0, 1, ...), so
// every rank gets the same bits, as NCCL promises for its all-reduce; but that order is the
// emulator's: NCCL's ring, tree or NVLS reductions add in another order (which depends on the
// algorithm, the channel and the chunk), so with 3 or more ranks its floating-point bits differ
// from these (docs/comm.md says which equalities hold). Integers wrap around as a GPU's integer
// arithmetic does.
//
// Not modelled: the fp8 types (ncclFloat8e4m3, ncclFloat8e5m2) and ncclRedOpCreatePreMulSum.
#include <cstring>
#include <type_traits>

#include "emulator/nccl_internal.h"

namespace brigade::emu::nccl {
namespace {

template <class T>
T combine(ncclRedOp_t op, T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;  // wrap around instead of undefined overflow
    if (op == ncclProd) return T(U(a) * U(b));
    if (op == ncclMax) return a < b ? b : a;
    if (op == ncclMin) return b < a ? b : a;
    return T(U(a) + U(b));
  } else {
    if (op == ncclProd) return a * b;
    if (op == ncclMax) return a < b ? b : a;
    if (op == ncclMin) return b < a ? b : a;
    return a + b;
  }
}

// How a type is stored and computed with: plain types are their own; f16 and bf16 compute in
// float and round back to 16 bits after every operation.
template <class T>
struct Plain {
  using Stored = T;
  static T load(T v) { return v; }
  static T store(T v) { return v; }
};

struct Half {
  using Stored = uint16_t;
  static float load(uint16_t bits) {
    _Float16 h;
    std::memcpy(&h, &bits, 2);
    return float(h);
  }
  static uint16_t store(float f) {
    const _Float16 h = static_cast<_Float16>(f);  // rounds to nearest even
    uint16_t bits;
    std::memcpy(&bits, &h, 2);
    return bits;
  }
};

struct BFloat16 {
  using Stored = uint16_t;
  static float load(uint16_t bits) {
    const uint32_t wide = uint32_t(bits) << 16;
    float f;
    std::memcpy(&f, &wide, 4);
    return f;
  }
  static uint16_t store(float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return uint16_t((bits >> 16) | 0x40);  // NaN stays NaN
    bits += 0x7fffu + ((bits >> 16) & 1u);  // round to nearest even
    return uint16_t(bits >> 16);
  }
};

// ncclAvg as NCCL computes it (enqueue.cc, hostToDevRedOp): for floating types a pre-multiplied
// sum — every contribution is first multiplied by the scalar 1/n, converted once to the type
// (float(1.0 / n) for f32, rounded to f16 or bf16 for those), and the products are summed; for
// integers a sum divided by n at the end (SumPostDiv). The scalar, for a floating type.
template <class Codec>
auto average_scale(size_t n) {
  using Value = decltype(Codec::load(typename Codec::Stored{}));
  if constexpr (std::is_same_v<Value, double>) return 1.0 / double(n);
  else return Codec::load(Codec::store(static_cast<Value>(float(1.0 / double(n)))));
}

template <class Codec>
void reduce_as(void* out, const std::vector<const char*>& parts, size_t count, ncclRedOp_t op) {
  using Stored = typename Codec::Stored;
  using Value = decltype(Codec::load(Stored{}));
  auto get = [](const char* base, size_t i) {
    Stored v;
    std::memcpy(&v, base + i * sizeof(Stored), sizeof(Stored));
    return v;
  };
  const bool premultiplied = op == ncclAvg && std::is_floating_point_v<Value>;
  Value scale{};
  if constexpr (std::is_floating_point_v<Value>) scale = premultiplied ? average_scale<Codec>(parts.size()) : Value{};
  // A contribution as it enters the reduction: times the scalar (rounded to the type, as a GPU's
  // multiply in that type is) when pre-multiplied.
  auto input = [&](const char* base, size_t i) {
    return premultiplied ? Codec::store(Codec::load(get(base, i)) * scale) : get(base, i);
  };
  const ncclRedOp_t combined = op == ncclAvg ? ncclSum : op;
  for (size_t i = 0; i < count; ++i) {
    Stored acc = input(parts[0], i);
    for (size_t r = 1; r < parts.size(); ++r)
      acc = Codec::store(combine(combined, Codec::load(acc), Codec::load(input(parts[r], i))));
    if constexpr (std::is_integral_v<Value>)
      if (op == ncclAvg) acc = Codec::store(Value(Codec::load(acc) / Value(parts.size())));
    std::memcpy(static_cast<char*>(out) + i * sizeof(Stored), &acc, sizeof(Stored));
  }
}

}  // namespace

size_t dtype_size(ncclDataType_t dtype) {
  switch (dtype) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}

std::string dtype_name(ncclDataType_t dtype) {
  switch (dtype) {
    case ncclInt8: return "i8";
    case ncclUint8: return "u8";
    case ncclInt32: return "i32";
    case ncclUint32: return "u32";
    case ncclInt64: return "i64";
    case ncclUint64: return "u64";
    case ncclFloat16: return "f16";
    case ncclFloat32: return "f32";
    case ncclFloat64: return "f64";
    case ncclBfloat16: return "bf16";
    default: return "datatype " + std::to_string(int(dtype));
  }
}

std::string op_name(ncclRedOp_t op) {
  switch (op) {
    case ncclSum: return "sum";
    case ncclProd: return "prod";
    case ncclMax: return "max";
    case ncclMin: return "min";
    case ncclAvg: return "avg";
    default: return "op " + std::to_string(int(op));
  }
}

std::string kind_name(Kind kind) {
  switch (kind) {
    case Kind::send: return "ncclSend";
    case Kind::recv: return "ncclRecv";
    case Kind::ack: return "an ack";
    case Kind::all_reduce: return "ncclAllReduce";
    case Kind::broadcast: return "ncclBroadcast";
    case Kind::reduce: return "ncclReduce";
    case Kind::all_gather: return "ncclAllGather";
    case Kind::reduce_scatter: return "ncclReduceScatter";
    case Kind::split: return "ncclCommSplit";
    case Kind::connect: return "a link setup message";
  }
  return "?";
}

std::string describe(const CallArgs& a) {
  const std::string peer = std::to_string(a.peer);
  const std::string count = std::to_string(a.count) + ", " + dtype_name(a.dtype);
  switch (a.kind) {
    case Kind::send: return "ncclSend to rank " + peer + " (count " + count + ")";
    case Kind::recv: return "ncclRecv from rank " + peer + " (count " + count + ")";
    case Kind::all_reduce: return "ncclAllReduce (count " + count + ", " + op_name(a.op) + ")";
    case Kind::broadcast: return "ncclBroadcast from root " + peer + " (count " + count + ")";
    case Kind::reduce: return "ncclReduce to root " + peer + " (count " + count + ", " + op_name(a.op) + ")";
    case Kind::all_gather: return "ncclAllGather (sendcount " + count + ")";
    case Kind::reduce_scatter: return "ncclReduceScatter (recvcount " + count + ", " + op_name(a.op) + ")";
    default: return kind_name(a.kind);
  }
}

void reduce(void* out, const std::vector<const char*>& parts, size_t count, ncclDataType_t dtype, ncclRedOp_t op) {
  switch (dtype) {
    case ncclInt8: return reduce_as<Plain<int8_t>>(out, parts, count, op);
    case ncclUint8: return reduce_as<Plain<uint8_t>>(out, parts, count, op);
    case ncclInt32: return reduce_as<Plain<int32_t>>(out, parts, count, op);
    case ncclUint32: return reduce_as<Plain<uint32_t>>(out, parts, count, op);
    case ncclInt64: return reduce_as<Plain<int64_t>>(out, parts, count, op);
    case ncclUint64: return reduce_as<Plain<uint64_t>>(out, parts, count, op);
    case ncclFloat16: return reduce_as<Half>(out, parts, count, op);
    case ncclFloat32: return reduce_as<Plain<float>>(out, parts, count, op);
    case ncclFloat64: return reduce_as<Plain<double>>(out, parts, count, op);
    case ncclBfloat16: return reduce_as<BFloat16>(out, parts, count, op);
    default: return;  // refused when the call was made
  }
}

}  // namespace brigade::emu::nccl
