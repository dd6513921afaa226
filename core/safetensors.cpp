// safetensors reading and writing. The file has three parts:
//   1. dtype names;
//   2. the header's schema: turning JSON (parsed by core/json.h, narrowed to what a header may
//      hold) into validated tensor entries;
//   3. file I/O: atomic save (core/atomic_file.h), validating load from a mapping (core/mapped_file.h).
#include "core/safetensors.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "core/atomic_file.h"
#include "core/json.h"
#include "core/mapped_file.h"
#include "core/utf8.h"
#include "kernels/ops.h"

namespace brigade {

// Element bytes are copied to and from memory as they are; the format stores them little-endian.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace {

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the limit other safetensors readers also enforce
constexpr int kMaxJsonDepth = 4;                     // root -> entry -> shape array, plus one spare
constexpr const char* kMetadataKey = "__metadata__";

std::atomic<int64_t> g_fail_save_after{-1};

// ================================ 1. dtypes ================================

const char* format_dtype(DType t) {
  switch (t) {
    case DType::f32: return "F32";
    case DType::f64: return "F64";
    case DType::bf16: return "BF16";
    case DType::f16: return "F16";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
  }
  return "?";
}

std::optional<DType> parse_dtype(const std::string& s) {
  for (DType t : {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i32, DType::i64})
    if (s == format_dtype(t)) return t;
  return std::nullopt;
}

// ================================ 2. header schema ================================

// The JSON a header may hold: one object of objects, arrays, strings and integers, nested no deeper
// than an entry's shape. Repeated keys pass the parser so that HeaderReader can name them
// ("duplicate tensor name 'w'").
JsonLimits header_limits(const std::string& context) {
  JsonLimits limits;
  limits.context = context;
  limits.document = "header";
  limits.max_depth = kMaxJsonDepth;
  limits.object_root = true;
  limits.literals = false;
  limits.fractions = false;
  limits.duplicate_keys = true;
  return limits;
}

struct Entry {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  uint64_t begin = 0, end = 0;  // byte offsets into the data area
};

struct Header {
  std::vector<Entry> entries;
  std::map<std::string, std::string> metadata;
};

const char* kind_name(Json::Kind k) {
  switch (k) {
    case Json::Kind::object: return "an object";
    case Json::Kind::array: return "an array";
    case Json::Kind::string: return "a string";
    case Json::Kind::number: return "an integer";  // header_limits() admits no other numbers
    case Json::Kind::boolean: return "a boolean";  // nor these two: listed for completeness
    case Json::Kind::null: return "null";
  }
  return "?";
}

class HeaderReader {
 public:
  explicit HeaderReader(const std::string& context) : context_(context) {}

  Header read(const Json& root, uint64_t data_size) {
    Header h;
    check_unique_keys(root, "", "tensor name");
    for (const auto& [key, value] : root.members) {
      if (key == kMetadataKey) h.metadata = read_metadata(value);
      else h.entries.push_back(read_entry(key, value));
    }
    check_layout(h.entries, data_size);
    return h;
  }

 private:
  template <class... Args>
  [[noreturn]] void error(const Args&... args) const {
    fail(context_, ": ", args...);
  }

  // Throws "<owner>duplicate <noun> 'key'" when an object repeats a key (JSON allows it; we do not).
  void check_unique_keys(const Json& obj, const std::string& owner, const char* noun) const {
    std::vector<std::string> keys;
    for (const auto& m : obj.members) keys.push_back(m.first);
    std::sort(keys.begin(), keys.end());
    auto dup = std::adjacent_find(keys.begin(), keys.end());
    if (dup != keys.end()) error(owner, "duplicate ", noun, " '", *dup, "'");
  }

  void expect_kind(const Json& v, Json::Kind kind, const std::string& what) const {
    if (v.kind != kind) error(what, " must be ", kind_name(kind), ", got ", kind_name(v.kind));
  }

  std::map<std::string, std::string> read_metadata(const Json& v) const {
    expect_kind(v, Json::Kind::object, "\"__metadata__\"");
    check_unique_keys(v, "", "metadata key");
    std::map<std::string, std::string> out;
    for (const auto& [key, value] : v.members) {
      expect_kind(value, Json::Kind::string, "metadata value '" + key + "'");
      out[key] = value.string;
    }
    return out;
  }

  // A non-negative integer that fits in int64 (sizes and offsets must be addressable).
  uint64_t read_count(const Json& v, const std::string& what) const {
    expect_kind(v, Json::Kind::number, what);
    if (v.negative && v.magnitude != 0) error(what, " is negative (-", v.magnitude, ")");
    if (v.magnitude > uint64_t(std::numeric_limits<int64_t>::max())) error(what, " overflows (", v.magnitude, ")");
    return v.magnitude;
  }

  Entry read_entry(const std::string& name, const Json& v) const {
    const std::string where = "tensor '" + name + "'";
    expect_kind(v, Json::Kind::object, where);
    check_unique_keys(v, where + " has a ", "key");
    const Json *dtype = nullptr, *shape = nullptr, *offsets = nullptr;
    for (const auto& [key, value] : v.members) {
      if (key == "dtype") dtype = &value;
      else if (key == "shape") shape = &value;
      else if (key == "data_offsets") offsets = &value;
      else error(where, " has an unexpected key '", key, "'");
    }
    if (!dtype || !shape || !offsets) error(where, " needs \"dtype\", \"shape\" and \"data_offsets\"");

    Entry e;
    e.name = name;
    expect_kind(*dtype, Json::Kind::string, where + " dtype");
    std::optional<DType> t = parse_dtype(dtype->string);
    if (!t) error(where, " has unknown dtype '", dtype->string, "' (brigade reads F64, F32, BF16, F16, I64, I32)");
    e.dtype = *t;

    expect_kind(*shape, Json::Kind::array, where + " shape");
    uint64_t bytes = dtype_size(e.dtype);
    for (const Json& d : shape->items) {
      const uint64_t size = read_count(d, where + " shape dimension");
      e.shape.push_back(int64_t(size));
      if (size != 0 && bytes > uint64_t(std::numeric_limits<int64_t>::max()) / size)
        error(where, " shape ", shape_str(e.shape), " overflows (too many bytes)");
      bytes *= size;
    }

    expect_kind(*offsets, Json::Kind::array, where + " data_offsets");
    if (offsets->items.size() != 2) error(where, " data_offsets must be [begin, end]");
    e.begin = read_count(offsets->items[0], where + " data_offsets begin");
    e.end = read_count(offsets->items[1], where + " data_offsets end");
    if (e.begin > e.end) error(where, " data_offsets [", e.begin, ", ", e.end, "] end before they begin");
    if (e.end - e.begin != bytes)
      error(where, " has shape ", shape_str(e.shape), " and dtype ", format_dtype(e.dtype), ", which need ", bytes,
            " bytes, but data_offsets [", e.begin, ", ", e.end, "] span ", e.end - e.begin);
    return e;
  }

  // The tensors must tile the data area exactly: sorted by offset, each begins where the last ended.
  void check_layout(std::vector<Entry> entries, uint64_t data_size) const {
    for (const Entry& e : entries)
      if (e.end > data_size)
        error("tensor '", e.name, "' data_offsets [", e.begin, ", ", e.end, "] lie outside the data area of ", data_size,
              " bytes (is the file truncated?)");
    std::sort(entries.begin(), entries.end(),
              [](const Entry& a, const Entry& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
    uint64_t covered = 0;
    const Entry* previous = nullptr;
    for (const Entry& e : entries) {
      if (e.begin < covered)
        error("tensors '", previous->name, "' and '", e.name, "' overlap in the data area (bytes ", e.begin, " to ",
              covered, ")");
      if (e.begin > covered) error("gap in the data area: bytes ", covered, " to ", e.begin, " belong to no tensor");
      covered = e.end;
      if (e.end > e.begin || previous == nullptr) previous = &e;
    }
    if (covered != data_size)
      error("gap in the data area: bytes ", covered, " to ", data_size, " belong to no tensor");
  }

  const std::string& context_;
};

// ================================ 3. files ================================


// Writes [data, data + n) to the file, unless the test hook's byte budget runs out first: then it
// writes what the budget allows and fails as a full disk would.
void write_budgeted(AtomicFile& file, const void* data, size_t n, int64_t& budget, const std::string& context) {
  if (budget >= 0 && uint64_t(budget) < n) {
    file.write(data, size_t(budget));
    fail(context, ": write failed: simulated failure (test hook)");
  }
  file.write(data, n);
  if (budget >= 0) budget -= int64_t(n);
}

// The header text for tensors laid out back to back in `order`, padded with spaces so the data area
// starts 8-byte aligned (readers that map the file can then use it in place).
std::string build_header(const std::vector<std::pair<const std::string*, const Tensor*>>& order,
                         const std::map<std::string, std::string>& metadata) {
  std::string h = "{";
  if (!metadata.empty()) {
    h += json_string(kMetadataKey) + ":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      if (!first) h += ",";
      h += json_string(k) + ":" + json_string(v);
      first = false;
    }
    h += "}";
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : order) {
    if (h.size() > 1) h += ",";
    h += json_string(*name) + ":{\"dtype\":\"" + format_dtype(t->dtype()) + "\",\"shape\":[";
    for (size_t d = 0; d < t->shape().size(); ++d) {
      if (d > 0) h += ",";
      h += std::to_string(t->shape()[d]);
    }
    const uint64_t end = offset + t->nbytes();
    h += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(end) + "]}";
    offset = end;
  }
  h += "}";
  h.append((8 - h.size() % 8) % 8, ' ');
  return h;
}

void encode_u64_le(uint64_t v, unsigned char out[8]) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<unsigned char>(v >> (8 * i));
}

uint64_t decode_u64_le(const unsigned char in[8]) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | in[i];
  return v;
}

}  // namespace

namespace testing {
void fail_next_save_after(int64_t bytes) { g_fail_save_after = bytes; }
}  // namespace testing

void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  const std::string context = "save_safetensors: '" + path + "'";
  int64_t budget = g_fail_save_after.exchange(-1);  // the test hook applies to one save only

  std::vector<std::pair<const std::string*, const Tensor*>> order;
  for (const auto& [name, t] : tensors) {
    BRIGADE_CHECK(!name.empty() && name != kMetadataKey && is_utf8(name), context, ": invalid tensor name '", name,
                  "' (names must be non-empty UTF-8 and not \"__metadata__\")");
    BRIGADE_CHECK(t.defined(), context, ": tensor '", name, "' is an undefined tensor");
    order.emplace_back(&name, &t);
  }
  for (const auto& [k, v] : metadata)
    BRIGADE_CHECK(is_utf8(k) && is_utf8(v), context, ": metadata entry '", k, "' is not valid UTF-8");
  const std::string header = build_header(order, metadata);

  AtomicFile file(path, context);
  unsigned char length[8];
  encode_u64_le(header.size(), length);
  write_budgeted(file, length, 8, budget, context);
  write_budgeted(file, header.data(), header.size(), budget, context);
  for (const auto& [name, t] : order) {
    // One tensor at a time, so a non-contiguous or GPU tensor costs one temporary copy at most.
    Tensor host = t->device().is_cpu() ? *t : t->detach().to(Device::cpu());  // detached: never taped
    Tensor dense = ops::contiguous(host);
    write_budgeted(file, dense.raw_data(), dense.nbytes(), budget, context);
  }
  file.commit();
}

Safetensors load_safetensors(const std::string& path) { return load_safetensors(path, nullptr); }

namespace {

// A safetensors file mapped for reading (core/mapped_file.h), its header read and checked whole:
// tensors are then copied out of the mapping, so reading some of them touches only their pages.
struct OpenFile {
  std::string context;
  MappedFile file;
  Header header;
  uint64_t data_start = 0;

  explicit OpenFile(const std::string& path)
      : context("load_safetensors: '" + path + "'"), file(path, context, MappedFile::Access::parts) {
    const uint64_t file_size = file.size();
    BRIGADE_CHECK(file_size >= 8, context, ": the file is ", file_size,
                  " bytes, too short to hold the 8-byte header length");
    unsigned char length[8];
    std::memcpy(length, file.data(), 8);
    const uint64_t header_size = decode_u64_le(length);
    BRIGADE_CHECK(header_size <= kMaxHeaderBytes, context, ": header length ", header_size,
                  " exceeds the limit of ", kMaxHeaderBytes, " bytes (corrupt file?)");
    BRIGADE_CHECK(header_size <= file_size - 8, context, ": header length ", header_size,
                  " runs past the end of the file (", file_size, " bytes)");
    file.prefetch(8, header_size);
    const Json root = parse_json(std::string(file.data() + 8, header_size), header_limits(context));
    data_start = 8 + header_size;
    header = HeaderReader(context).read(root, file_size - data_start);
  }

  // Entry `e`'s bytes (checked to lie in the data area when the header was read), read in.
  const char* bytes(const Entry& e) const {
    file.prefetch(data_start + e.begin, e.end - e.begin);
    return file.data() + data_start + e.begin;
  }
};

}  // namespace

SafetensorsHeader read_safetensors_header(const std::string& path) {
  OpenFile file(path);
  SafetensorsHeader out;
  out.metadata = std::move(file.header.metadata);
  for (const Entry& e : file.header.entries) out.tensors[e.name] = {e.dtype, e.shape};
  return out;
}

Safetensors load_safetensors(const std::string& path, const std::function<bool(const std::string&)>& wanted) {
  OpenFile file(path);
  Safetensors out;
  out.metadata = std::move(file.header.metadata);
  for (const Entry& e : file.header.entries) {
    if (wanted && !wanted(e.name)) continue;
    Tensor t = empty(e.shape, e.dtype);
    if (t.nbytes() > 0) std::memcpy(t.raw_data(), file.bytes(e), t.nbytes());
    out.tensors.emplace(e.name, std::move(t));
  }
  return out;
}

}  // namespace brigade
