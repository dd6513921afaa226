// safetensors reading and writing. The file has four parts:
//   1. dtype names and UTF-8 checks;
//   2. a small, strict JSON parser and writer (only what the header needs: objects, arrays, strings
//      and integers);
//   3. the header's schema: turning JSON into validated tensor entries;
//   4. file I/O: atomic save, validating load.
#include "core/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "kernels/ops.h"

namespace brigade {

// Element bytes are copied to and from memory as they are; the format stores them little-endian.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace {

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the limit other safetensors readers also enforce
constexpr int kMaxJsonDepth = 4;                     // root -> entry -> shape array, plus one spare
constexpr const char* kMetadataKey = "__metadata__";

std::atomic<int64_t> g_fail_save_after{-1};

// ================================ 1. dtypes and UTF-8 ================================

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

// True when `s` is well-formed UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF).
bool is_utf8(const std::string& s) {
  static constexpr uint32_t kSmallest[] = {0, 0x80, 0x800, 0x10000};  // per continuation-byte count
  size_t i = 0;
  while (i < s.size()) {
    const auto lead = static_cast<unsigned char>(s[i]);
    int extra;  // continuation bytes after the lead byte
    uint32_t cp;
    if (lead < 0x80) {
      extra = 0;
      cp = lead;
    } else if ((lead & 0xE0) == 0xC0) {
      extra = 1;
      cp = lead & 0x1F;
    } else if ((lead & 0xF0) == 0xE0) {
      extra = 2;
      cp = lead & 0x0F;
    } else if ((lead & 0xF8) == 0xF0) {
      extra = 3;
      cp = lead & 0x07;
    } else {
      return false;
    }
    if (i + size_t(extra) >= s.size()) return false;  // truncated sequence
    for (int k = 1; k <= extra; ++k) {
      const auto next = static_cast<unsigned char>(s[i + size_t(k)]);
      if ((next & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (next & 0x3F);
    }
    if (cp < kSmallest[extra] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += size_t(extra) + 1;
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

// ================================ 2. JSON ================================

// A parsed JSON value. Numbers keep their sign and magnitude apart so that the schema check can say
// "negative" or "too large" instead of silently wrapping.
struct Json {
  enum class Kind { object, array, string, integer } kind = Kind::object;
  std::vector<std::pair<std::string, Json>> members;  // object, in file order (duplicates kept)
  std::vector<Json> items;                            // array
  std::string text;                                   // string
  bool negative = false;                              // integer
  uint64_t magnitude = 0;                             // integer
};

class JsonParser {
 public:
  JsonParser(const std::string& text, const std::string& context) : s_(text), context_(context) {}

  // The whole text must be one object, optionally followed by whitespace (writers pad with spaces).
  Json parse_document() {
    skip_space();
    if (peek() != '{') error("the header must be a JSON object");
    Json root = parse_value(0);
    skip_space();
    if (pos_ != s_.size()) error("unexpected data after the JSON object");
    return root;
  }

 private:
  [[noreturn]] void error(const std::string& what) const {
    fail(context_, ": invalid JSON header at byte ", pos_, ": ", what);
  }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  bool at_end() const { return pos_ >= s_.size(); }
  void skip_space() {
    while (!at_end() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  void expect(char c) {
    if (at_end() || s_[pos_] != c) error(std::string("expected '") + c + "'");
    ++pos_;
  }

  Json parse_value(int depth) {
    if (depth >= kMaxJsonDepth) error("nesting is too deep for a safetensors header");
    skip_space();
    if (at_end()) error("unexpected end of the header");
    const char c = peek();
    if (c == '{') return parse_object(depth);
    if (c == '[') return parse_array(depth);
    if (c == '"') {
      Json v;
      v.kind = Json::Kind::string;
      v.text = parse_string();
      return v;
    }
    if (c == '-' || (c >= '0' && c <= '9')) return parse_integer();
    error(std::string("unexpected character '") + c + "' (a safetensors header holds only objects, arrays, "
                                                      "strings and integers)");
  }

  Json parse_object(int depth) {
    Json v;
    v.kind = Json::Kind::object;
    expect('{');
    skip_space();
    if (peek() == '}') { ++pos_; return v; }
    while (true) {
      skip_space();
      if (peek() != '"') error("expected a string key");
      std::string key = parse_string();
      skip_space();
      expect(':');
      v.members.emplace_back(std::move(key), parse_value(depth + 1));
      skip_space();
      if (peek() == ',') { ++pos_; continue; }
      expect('}');
      return v;
    }
  }

  Json parse_array(int depth) {
    Json v;
    v.kind = Json::Kind::array;
    expect('[');
    skip_space();
    if (peek() == ']') { ++pos_; return v; }
    while (true) {
      v.items.push_back(parse_value(depth + 1));
      skip_space();
      if (peek() == ',') { ++pos_; continue; }
      expect(']');
      return v;
    }
  }

  uint32_t parse_hex4() {
    if (pos_ + 4 > s_.size()) error("truncated \\u escape");
    uint32_t cp = 0;
    for (int k = 0; k < 4; ++k) {
      const char h = s_[pos_++];
      cp <<= 4;
      if (h >= '0' && h <= '9') cp |= uint32_t(h - '0');
      else if (h >= 'a' && h <= 'f') cp |= uint32_t(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') cp |= uint32_t(h - 'A' + 10);
      else error("invalid hex digit in \\u escape");
    }
    return cp;
  }

  std::string parse_string() {
    expect('"');
    std::string out;
    while (true) {
      if (at_end()) error("unterminated string");
      const char c = s_[pos_++];
      if (c == '"') break;
      if (static_cast<unsigned char>(c) < 0x20) error("control character inside a string");
      if (c != '\\') { out += c; continue; }
      if (at_end()) error("unterminated escape");
      const char e = s_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp = parse_hex4();
          if (cp >= 0xDC00 && cp <= 0xDFFF) error("unpaired surrogate in \\u escape");
          if (cp >= 0xD800 && cp <= 0xDBFF) {  // a high surrogate: a low one must follow
            if (pos_ + 2 > s_.size() || s_[pos_] != '\\' || s_[pos_ + 1] != 'u') error("unpaired surrogate in \\u escape");
            pos_ += 2;
            const uint32_t low = parse_hex4();
            if (low < 0xDC00 || low > 0xDFFF) error("unpaired surrogate in \\u escape");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          append_utf8(out, cp);
          break;
        }
        default: error(std::string("invalid escape '\\") + e + "'");
      }
    }
    if (!is_utf8(out)) error("string is not valid UTF-8");
    return out;
  }

  // Integers only: fractions and exponents never appear in a valid header.
  Json parse_integer() {
    Json v;
    v.kind = Json::Kind::integer;
    if (peek() == '-') { v.negative = true; ++pos_; }
    if (!(peek() >= '0' && peek() <= '9')) error("expected a digit");
    if (peek() == '0' && pos_ + 1 < s_.size() && s_[pos_ + 1] >= '0' && s_[pos_ + 1] <= '9')
      error("numbers must not have leading zeros");
    while (peek() >= '0' && peek() <= '9') {
      const uint64_t digit = uint64_t(s_[pos_++] - '0');
      if (v.magnitude > (std::numeric_limits<uint64_t>::max() - digit) / 10) error("number is too large");
      v.magnitude = v.magnitude * 10 + digit;
    }
    if (peek() == '.' || peek() == 'e' || peek() == 'E') error("numbers in a safetensors header must be integers");
    return v;
  }

  const std::string& s_;
  const std::string& context_;
  size_t pos_ = 0;
};

// A JSON string literal for `s` (which must be UTF-8): quotes, backslashes and control characters
// are escaped, everything else is copied.
std::string json_quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\u00";
      out += kHex[(c >> 4) & 0xF];
      out += kHex[c & 0xF];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// ================================ 3. header schema ================================

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
    case Json::Kind::integer: return "an integer";
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
      out[key] = value.text;
    }
    return out;
  }

  // A non-negative integer that fits in int64 (sizes and offsets must be addressable).
  uint64_t read_count(const Json& v, const std::string& what) const {
    expect_kind(v, Json::Kind::integer, what);
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
    std::optional<DType> t = parse_dtype(dtype->text);
    if (!t) error(where, " has unknown dtype '", dtype->text, "' (brigade reads F64, F32, BF16, F16, I64, I32)");
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

// ================================ 4. files ================================

std::string errno_text() { return std::strerror(errno); }

// Closes a file descriptor when it goes out of scope (close errors are checked where they matter).
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() { reset(); }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

// Writes all of [data, data + n), retrying partial writes; honours the test hook.
void write_all(int fd, const void* data, size_t n, int64_t& budget, const std::string& context) {
  const char* p = static_cast<const char*>(data);
  size_t todo = n;
  if (budget >= 0 && uint64_t(budget) < n) todo = size_t(budget);
  while (todo > 0) {
    const ssize_t w = ::write(fd, p, todo);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) fail(context, ": write failed: ", errno_text());
    p += w;
    todo -= size_t(w);
  }
  if (budget >= 0) {
    if (uint64_t(budget) < n) fail(context, ": write failed: simulated failure (test hook)");
    budget -= int64_t(n);
  }
}

// Reads exactly n bytes at `offset`.
void read_all(int fd, void* data, size_t n, uint64_t offset, const std::string& context) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, n, off_t(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) fail(context, ": read failed: ", errno_text());
    if (r == 0) fail(context, ": unexpected end of file");
    p += r;
    n -= size_t(r);
    offset += uint64_t(r);
  }
}

std::string parent_directory(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// The header text for tensors laid out back to back in `order`, padded with spaces so the data area
// starts 8-byte aligned (readers that map the file can then use it in place).
std::string build_header(const std::vector<std::pair<const std::string*, const Tensor*>>& order,
                         const std::map<std::string, std::string>& metadata) {
  std::string h = "{";
  if (!metadata.empty()) {
    h += json_quote(kMetadataKey) + ":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      if (!first) h += ",";
      h += json_quote(k) + ":" + json_quote(v);
      first = false;
    }
    h += "}";
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : order) {
    if (h.size() > 1) h += ",";
    h += json_quote(*name) + ":{\"dtype\":\"" + format_dtype(t->dtype()) + "\",\"shape\":[";
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

  // Unique within this process (counter) and across processes (pid), next to the target so that the
  // final rename stays within one file system and is therefore atomic.
  static std::atomic<uint64_t> counter{0};
  const std::string temp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  FileDescriptor fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  BRIGADE_CHECK(fd.get() >= 0, context, ": cannot create the temporary file '", temp, "': ", errno_text());
  try {
    unsigned char length[8];
    encode_u64_le(header.size(), length);
    write_all(fd.get(), length, 8, budget, context);
    write_all(fd.get(), header.data(), header.size(), budget, context);
    for (const auto& [name, t] : order) {
      // One tensor at a time, so a non-contiguous or GPU tensor costs one temporary copy at most.
      Tensor host = t->device().is_cpu() ? *t : t->detach().to(Device::cpu());  // detached: never taped
      Tensor dense = ops::contiguous(host);
      write_all(fd.get(), dense.raw_data(), dense.nbytes(), budget, context);
    }
    // Data must be on disk before the rename makes it visible; otherwise a crash could leave the
    // new name pointing at an incomplete file.
    BRIGADE_CHECK(::fsync(fd.get()) == 0, context, ": fsync failed: ", errno_text());
    BRIGADE_CHECK(::close(fd.release()) == 0, context, ": close failed: ", errno_text());
    BRIGADE_CHECK(::rename(temp.c_str(), path.c_str()) == 0, context, ": cannot rename '", temp, "' over it: ",
                  errno_text());
  } catch (...) {
    fd.reset();
    ::unlink(temp.c_str());
    throw;
  }
  // The rename itself is recorded in the directory, so flush the directory too (best effort where the
  // file system does not support it).
  FileDescriptor dir(::open(parent_directory(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() >= 0 && ::fsync(dir.get()) != 0 && errno != EINVAL)
    fail(context, ": fsync of the directory failed: ", errno_text());
}

Safetensors load_safetensors(const std::string& path) {
  const std::string context = "load_safetensors: '" + path + "'";
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  BRIGADE_CHECK(fd.get() >= 0, context, ": cannot open: ", errno_text());
  struct stat st {};
  BRIGADE_CHECK(::fstat(fd.get(), &st) == 0, context, ": cannot stat: ", errno_text());
  BRIGADE_CHECK(S_ISREG(st.st_mode), context, ": not a regular file");
  const uint64_t file_size = uint64_t(st.st_size);

  BRIGADE_CHECK(file_size >= 8, context, ": the file is ", file_size,
                " bytes, too short to hold the 8-byte header length");
  unsigned char length[8];
  read_all(fd.get(), length, 8, 0, context);
  const uint64_t header_size = decode_u64_le(length);
  BRIGADE_CHECK(header_size <= kMaxHeaderBytes, context, ": header length ", header_size,
                " exceeds the limit of ", kMaxHeaderBytes, " bytes (corrupt file?)");
  BRIGADE_CHECK(header_size <= file_size - 8, context, ": header length ", header_size,
                " runs past the end of the file (", file_size, " bytes)");

  std::string text(header_size, '\0');
  read_all(fd.get(), text.data(), header_size, 8, context);
  const Json root = JsonParser(text, context).parse_document();
  const uint64_t data_start = 8 + header_size;
  Header header = HeaderReader(context).read(root, file_size - data_start);

  Safetensors out;
  out.metadata = std::move(header.metadata);
  for (const Entry& e : header.entries) {
    Tensor t = empty(e.shape, e.dtype);
    read_all(fd.get(), t.raw_data(), t.nbytes(), data_start + e.begin, context);
    out.tensors.emplace(e.name, std::move(t));
  }
  return out;
}

}  // namespace brigade
