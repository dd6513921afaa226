// safetensors and checkpoints: bitwise round trips, the exact bytes on disk, refusal of every kind of
// damaged file, and atomic saves.
#include "test_util.h"
#include "temp_dir.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "nn/checkpoint.h"
#include "optim/optim.h"

using namespace brigade;
namespace fs = std::filesystem;

namespace {

using test::TempDir;

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

std::string u64_le(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[size_t(i)] = char((v >> (8 * i)) & 0xFF);
  return s;
}

uint64_t read_u64_le(const std::string& s, size_t at) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[at + size_t(i)]);
  return v;
}

// A safetensors file assembled by hand: length, header text, data bytes.
std::string make_file(const std::string& header, const std::string& data) { return u64_le(header.size()) + header + data; }

// The contiguous bytes of a tensor, for bitwise comparisons.
std::string bytes_of(const Tensor& t) {
  Tensor c = ops::contiguous(t);
  return std::string(static_cast<const char*>(c.raw_data()), c.nbytes());
}

template <class T>
std::string raw(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

void require_same_tensor(const Tensor& got, const Tensor& expected) {
  REQUIRE(got.dtype() == expected.dtype());
  REQUIRE(got.shape() == expected.shape());
  REQUIRE(got.is_contiguous());
  REQUIRE(bytes_of(got) == bytes_of(expected));
}

Tensor random_of(const Shape& shape, uint64_t seed, DType dtype) {
  // Integers get a wider spread so the values are not all 0 and +-1.
  return test::random(shape, seed, dtype, is_integral(dtype) ? 1000.0 : 1.0);
}

}  // namespace

// ============================== round trips ==============================

TEST_CASE("safetensors round trip is bitwise for every dtype and layout", "[safetensors]") {
  const DType dtype = GENERATE(DType::f32, DType::f64, DType::bf16, DType::f16, DType::i32, DType::i64);
  TempDir dir;
  std::map<std::string, Tensor> tensors = {
      {"matrix", random_of({3, 4}, 1, dtype)},
      {"scalar", random_of({}, 2, dtype)},
      {"empty", random_of({0, 3}, 3, dtype)},
      {"strided", test::strided(random_of({2, 5}, 4, dtype))},
      {"transposed", test::transposed(random_of({4, 3}, 5, dtype))},
      {"expanded", random_of({1, 3}, 6, dtype).expand({4, 3})},
      {"blocks.0.attn.weight", random_of({2, 2, 2}, 7, dtype)},
  };
  REQUIRE(!tensors.at("transposed").is_contiguous());
  const std::string path = dir.file("all.safetensors");
  save_safetensors(path, tensors, {{"step", "42"}, {"note", "quotes \" and \\ and\nnewline, ünïcödé"}});
  Safetensors back = load_safetensors(path);
  REQUIRE(back.tensors.size() == tensors.size());
  for (const auto& [name, t] : tensors) require_same_tensor(back.tensors.at(name), t);
  REQUIRE(back.metadata.size() == 2);
  REQUIRE(back.metadata.at("step") == "42");
  REQUIRE(back.metadata.at("note") == "quotes \" and \\ and\nnewline, ünïcödé");
}

TEST_CASE("safetensors keeps special float values and odd names exactly", "[safetensors]") {
  TempDir dir;
  Tensor special = from_vector(std::vector<double>{0.0, -0.0, INFINITY, -INFINITY, NAN, 1e-310}, {6}, DType::f64);
  const std::string odd = "weird \"name\"\twith\\ctrl\x01 and 名前";
  save_safetensors(dir.file("s.safetensors"), {{"special", special}, {odd, ones({1})}});
  Safetensors back = load_safetensors(dir.file("s.safetensors"));
  require_same_tensor(back.tensors.at("special"), special);
  REQUIRE(back.tensors.count(odd) == 1);
  REQUIRE(back.metadata.empty());
}

TEST_CASE("an empty tensor map round-trips", "[safetensors]") {
  TempDir dir;
  save_safetensors(dir.file("e.safetensors"), {});
  Safetensors back = load_safetensors(dir.file("e.safetensors"));
  REQUIRE(back.tensors.empty());
  REQUIRE(back.metadata.empty());
}

// ============================== the bytes on disk ==============================

TEST_CASE("the written file is laid out as the format says", "[safetensors]") {
  TempDir dir;
  Tensor a = tensor({{1.5, -2.0, 3.25}, {0.0, 1e3, -7.0}});     // f32 [2, 3]: 24 bytes
  Tensor b = ops::to_dtype(tensor({1.0, -2.0, 0.5, 3.0}), DType::bf16);  // bf16 [4]: 8 bytes
  Tensor c = from_vector(std::vector<double>{7, -9}, {2}, DType::i64);   // i64 [2]: 16 bytes
  const std::string path = dir.file("layout.safetensors");
  save_safetensors(path, {{"a", a}, {"b", b}, {"c", c}}, {{"step", "7"}});
  const std::string file = read_bytes(path);

  const uint64_t n = read_u64_le(file, 0);
  REQUIRE(n < file.size());
  REQUIRE((8 + n) % 8 == 0);  // padded so the data area is 8-byte aligned
  const std::string header = file.substr(8, n);
  REQUIRE(header.front() == '{');
  const size_t close = header.find_last_of('}');
  REQUIRE(header.find_first_not_of(' ', close + 1) == std::string::npos);  // only space padding after
  CHECK(header.find(R"("__metadata__":{"step":"7"})") != std::string::npos);
  CHECK(header.find(R"("a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]})") != std::string::npos);
  CHECK(header.find(R"("b":{"dtype":"BF16","shape":[4],"data_offsets":[24,32]})") != std::string::npos);
  CHECK(header.find(R"("c":{"dtype":"I64","shape":[2],"data_offsets":[32,48]})") != std::string::npos);
  REQUIRE(file.size() == 8 + n + 48);

  // The data area, decoded by hand: little-endian IEEE floats, bf16 = the top half of an f32, i64.
  const std::string data = file.substr(8 + n);
  const std::vector<float> a_values = {1.5f, -2.0f, 3.25f, 0.0f, 1e3f, -7.0f};
  REQUIRE(data.substr(0, 24) == raw(a_values));
  const std::vector<uint16_t> b_bits = {0x3F80, 0xC000, 0x3F00, 0x4040};
  REQUIRE(data.substr(24, 8) == raw(b_bits));
  REQUIRE(data.substr(32, 16) == raw(std::vector<int64_t>{7, -9}));
}

TEST_CASE("files written by other tools load: any order, whitespace, escapes", "[safetensors]") {
  TempDir dir;
  // Data stored in the opposite order to the header, with a \u escape in a name and f16 values.
  const std::string header =
      "{ \"second\" : {\"data_offsets\": [4, 10], \"shape\": [3], \"dtype\": \"F16\"},\n"
      "  \"caf\\u00e9\\ud83d\\ude00\": {\"dtype\": \"I32\", \"shape\": [], \"data_offsets\": [0, 4]},\n"
      "  \"__metadata__\": {\"format\": \"pt\"} }   ";
  const std::string data = raw(std::vector<int32_t>{-5}) + raw(std::vector<uint16_t>{0x3C00, 0xC000, 0x3800});
  write_bytes(dir.file("x.safetensors"), make_file(header, data));
  Safetensors st = load_safetensors(dir.file("x.safetensors"));
  REQUIRE(st.metadata.at("format") == "pt");
  REQUIRE(st.tensors.at("second").dtype() == DType::f16);
  REQUIRE(st.tensors.at("second").to_vector() == std::vector<double>{1.0, -2.0, 0.5});
  const Tensor& cafe = st.tensors.at("caf\xC3\xA9\xF0\x9F\x98\x80");
  REQUIRE(cafe.dim() == 0);
  REQUIRE(cafe.item() == -5);
}

// ============================== damaged files ==============================

namespace {

// A valid two-tensor file: "w" f32 [2, 2] at [0, 16), "b" f32 [2] at [16, 24).
const std::string kGoodData(24, '\x01');

std::string header_with(const std::string& w_entry, const std::string& b_entry) {
  return "{\"w\":" + w_entry + ",\"b\":" + b_entry + "}";
}

const std::string kW = R"({"dtype":"F32","shape":[2,2],"data_offsets":[0,16]})";
const std::string kB = R"({"dtype":"F32","shape":[2],"data_offsets":[16,24]})";

void require_refused(const TempDir& dir, const std::string& bytes, const std::string& message) {
  const std::string path = dir.file("bad.safetensors");
  write_bytes(path, bytes);
  REQUIRE_THROWS_WITH(load_safetensors(path), Catch::Contains(message) && Catch::Contains("load_safetensors: '" + path));
  // Reading the header alone, or no tensor's data, checks the whole file all the same.
  REQUIRE_THROWS_WITH(read_safetensors_header(path), Catch::Contains(message) && Catch::Contains(path));
  REQUIRE_THROWS_WITH(load_safetensors(path, [](const std::string&) { return false; }), Catch::Contains(message));
}

}  // namespace

TEST_CASE("the hand-made reference file is valid", "[safetensors][corrupt]") {
  TempDir dir;
  write_bytes(dir.file("ok.safetensors"), make_file(header_with(kW, kB), kGoodData));
  Safetensors st = load_safetensors(dir.file("ok.safetensors"));
  REQUIRE(st.tensors.at("w").shape() == Shape{2, 2});
  REQUIRE(st.tensors.at("b").shape() == Shape{2});
}

TEST_CASE("truncated files are refused", "[safetensors][corrupt]") {
  TempDir dir;
  Tensor t = test::random({4, 4}, 9, DType::f32);
  save_safetensors(dir.file("good.safetensors"), {{"t", t}});
  const std::string good = read_bytes(dir.file("good.safetensors"));
  const uint64_t n = read_u64_le(good, 0);

  require_refused(dir, good.substr(0, 5), "too short to hold the 8-byte header length");
  require_refused(dir, "", "the file is 0 bytes");
  require_refused(dir, good.substr(0, 8 + n / 2), "runs past the end of the file");
  require_refused(dir, good.substr(0, good.size() - 1), "lie outside the data area of 63 bytes (is the file truncated?)");
  require_refused(dir, good.substr(0, 8 + n), "lie outside the data area of 0 bytes");
  require_refused(dir, good + "extra", "gap in the data area: bytes 64 to 69 belong to no tensor");
}

TEST_CASE("a damaged header length is refused", "[safetensors][corrupt]") {
  TempDir dir;
  save_safetensors(dir.file("good.safetensors"), {{"t", ones({3})}});
  const std::string good = read_bytes(dir.file("good.safetensors"));
  const uint64_t n = read_u64_le(good, 0);
  auto with_length = [&](uint64_t length) { return u64_le(length) + good.substr(8); };
  require_refused(dir, with_length(n + 1000), "runs past the end of the file");
  require_refused(dir, with_length(uint64_t(1) << 40), "exceeds the limit of 100000000 bytes");
  require_refused(dir, with_length(~uint64_t(0)), "exceeds the limit");
  // A length that stops just before the header's closing brace.
  const uint64_t close = good.substr(8, n).find_last_of('}');
  require_refused(dir, with_length(close), "invalid JSON header");
  // Bits flipped in the high bytes.
  std::string flipped = good;
  flipped[7] = char(0x80);
  require_refused(dir, flipped, "exceeds the limit");
  require_refused(dir, with_length(0), "invalid JSON header at byte 0: the header must be a JSON object");
}

TEST_CASE("bad offsets are refused: overlaps, gaps, out of range, inconsistent sizes", "[safetensors][corrupt]") {
  TempDir dir;
  auto w_at = [](int begin, int end) {
    return R"({"dtype":"F32","shape":[2,2],"data_offsets":[)" + std::to_string(begin) + "," + std::to_string(end) + "]}";
  };
  auto b_at = [](int begin, int end) {
    return R"({"dtype":"F32","shape":[2],"data_offsets":[)" + std::to_string(begin) + "," + std::to_string(end) + "]}";
  };
  require_refused(dir, make_file(header_with(w_at(0, 16), b_at(8, 16)), std::string(16, '\0')),
                  "tensors 'w' and 'b' overlap in the data area");
  require_refused(dir, make_file(header_with(w_at(0, 16), b_at(20, 28)), std::string(28, '\0')),
                  "gap in the data area: bytes 16 to 20 belong to no tensor");
  require_refused(dir, make_file(header_with(w_at(8, 24), b_at(24, 32)), std::string(32, '\0')),
                  "gap in the data area: bytes 0 to 8");
  require_refused(dir, make_file(header_with(w_at(0, 16), b_at(16, 24)), std::string(20, '\0')),
                  "tensor 'b' data_offsets [16, 24] lie outside the data area of 20 bytes");
  require_refused(dir, make_file(header_with(w_at(0, 12), b_at(12, 20)), std::string(20, '\0')),
                  "tensor 'w' has shape [2, 2] and dtype F32, which need 16 bytes, but data_offsets [0, 12] span 12");
  require_refused(dir, make_file(header_with(w_at(16, 0), kB), kGoodData), "end before they begin");
  require_refused(dir, make_file(header_with(R"({"dtype":"F32","shape":[2,2],"data_offsets":[0]})", kB), kGoodData),
                  "data_offsets must be [begin, end]");
  require_refused(dir, make_file(header_with(R"({"dtype":"F32","shape":[2,2],"data_offsets":[0,-16]})", kB), kGoodData),
                  "tensor 'w' data_offsets end is negative");
}

TEST_CASE("bad dtypes and shapes are refused", "[safetensors][corrupt]") {
  TempDir dir;
  auto w_entry = [](const std::string& dtype, const std::string& shape) {
    return R"({"dtype":")" + dtype + R"(","shape":)" + shape + R"(,"data_offsets":[0,16]})";
  };
  require_refused(dir, make_file(header_with(w_entry("U8", "[16]"), kB), kGoodData),
                  "tensor 'w' has unknown dtype 'U8'");
  require_refused(dir, make_file(header_with(w_entry("f32", "[2,2]"), kB), kGoodData), "unknown dtype 'f32'");
  require_refused(dir, make_file(header_with(w_entry("F32", "[-2,-2]"), kB), kGoodData),
                  "tensor 'w' shape dimension is negative (-2)");
  require_refused(dir, make_file(header_with(w_entry("F32", "[9223372036854775808]"), kB), kGoodData),
                  "shape dimension overflows");
  require_refused(dir, make_file(header_with(w_entry("F32", "[4294967296,4294967296]"), kB), kGoodData),
                  "overflows (too many bytes)");
  require_refused(dir, make_file(header_with(w_entry("F32", "[99999999999999999999999]"), kB), kGoodData),
                  "number is too large");
  require_refused(dir, make_file(header_with(w_entry("F32", "[2.0,2]"), kB), kGoodData), "must be integers");
  require_refused(dir, make_file(header_with(w_entry("F32", "\"2x2\""), kB), kGoodData),
                  "tensor 'w' shape must be an array, got a string");
  require_refused(dir, make_file(header_with(R"({"dtype":"F32","shape":[2,2]})", kB), kGoodData),
                  "tensor 'w' needs \"dtype\", \"shape\" and \"data_offsets\"");
  require_refused(dir, make_file(header_with(R"({"dtype":"F32","shape":[2,2],"data_offsets":[0,16],"x":1})", kB), kGoodData),
                  "tensor 'w' has an unexpected key 'x'");
  require_refused(dir, make_file(header_with(R"({"dtype":"F32","dtype":"F32","shape":[2,2],"data_offsets":[0,16]})", kB), kGoodData),
                  "tensor 'w' has a duplicate key 'dtype'");
  require_refused(dir, make_file(R"({"w":)" + kW + R"(,"w":)" + kB + "}", kGoodData), "duplicate tensor name 'w'");
  require_refused(dir, make_file(R"({"w":[1,2]})", kGoodData), "tensor 'w' must be an object, got an array");
  require_refused(dir, make_file(R"({"__metadata__":{"step":7},"w":)" + kW + R"(,"b":)" + kB + "}", kGoodData),
                  "metadata value 'step' must be a string, got an integer");
}

TEST_CASE("invalid JSON is refused", "[safetensors][corrupt]") {
  TempDir dir;
  const std::string valid = header_with(kW, kB);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {valid.substr(0, valid.size() - 1), "expected '}'"},
      {"[" + valid + "]", "the header must be a JSON object"},
      {valid + "x", "unexpected data after the JSON object"},
      {R"({"w":)" + kW + ",}", "expected a string key"},
      {R"({"w)", "unterminated string"},
      {R"({"w":)" + kW + R"(,"b":true})", "unexpected character 't'"},
      {"{\"a\tb\":1}", "control character inside a string"},
      {R"({"\q":1})", "invalid escape '\\q'"},
      {R"({"\ud800":1})", "unpaired surrogate"},
      {"{\"\xff\":1}", "not valid UTF-8"},
      {R"({"a":[[[[[1]]]]]})", "nesting is too deep"},
      {R"({"a":{"dtype":"F32","shape":[01],"data_offsets":[0,4]}})", "leading zeros"},
      {R"({"a" 1})", "expected ':'"},
  };
  for (const auto& [header, message] : cases) {
    INFO(header);
    require_refused(dir, make_file(header, kGoodData), message);
  }
}

TEST_CASE("a file's header alone, and some of its tensors, as the whole load reads them", "[safetensors]") {
  TempDir dir;
  const std::map<std::string, Tensor> tensors = {{"big", test::random({64, 96}, 1, DType::f32)},
                                                 {"ids", test::random({5}, 2, DType::i64)},
                                                 {"half", test::random({3, 7}, 3, DType::bf16)}};
  save_safetensors(dir.file("m.safetensors"), tensors, {{"step", "12"}});
  const SafetensorsHeader header = read_safetensors_header(dir.file("m.safetensors"));
  REQUIRE(header.metadata == std::map<std::string, std::string>{{"step", "12"}});
  REQUIRE(header.tensors.size() == 3);
  for (const auto& [name, t] : tensors) {
    REQUIRE(header.tensors.at(name).dtype == t.dtype());
    REQUIRE(header.tensors.at(name).shape == t.shape());
  }
  const Safetensors some = load_safetensors(dir.file("m.safetensors"), [](const std::string& n) { return n != "big"; });
  REQUIRE(some.tensors.size() == 2);
  for (const char* name : {"ids", "half"}) test::require_equal(some.tensors.at(name), tensors.at(name));
}

namespace {

// Drops the file's pages from the page cache (they are clean: save_safetensors flushed them).
void evict_from_page_cache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

// How many pages of bytes [begin, end) of the file are in the page cache (mincore on a fresh mapping,
// which touches nothing).
size_t cached_pages(const std::string& path, size_t begin, size_t end) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  const size_t size = size_t(std::filesystem::file_size(path));
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  REQUIRE(map != MAP_FAILED);
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in_core((size + page - 1) / page);
  REQUIRE(::mincore(map, size, in_core.data()) == 0);
  ::munmap(map, size);
  size_t n = 0;
  for (size_t p = begin / page; p < (end + page - 1) / page; ++p) n += in_core[p] & 1;
  return n;
}

}  // namespace

TEST_CASE("reading some tensors brings only their pages of the file into memory", "[safetensors]") {
  // What a pipeline rank relies on to read its own layers of a large shard: the other tensors' bytes
  // are never read. "big" (8 MiB) comes first in the data area, "small" after it.
  TempDir dir;
  const std::string path = dir.file("m.safetensors");
  const Tensor small = test::random({16}, 4, DType::f32);
  save_safetensors(path, {{"big", zeros({2048, 1024})}, {"small", small}});
  const std::string start = read_bytes(path).substr(0, 8);
  const size_t big_begin = 8 + size_t(read_u64_le(start, 0)), big_end = big_begin + (size_t(8) << 20);
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  const size_t big_pages = (big_end + page - 1) / page - big_begin / page;  // the pages its bytes span
  evict_from_page_cache(path);
  if (cached_pages(path, big_begin, big_end) > big_pages / 2) {
    WARN("this file system keeps the file in memory whatever we advise (tmpfs?): nothing to measure");
    return;
  }
  const Safetensors some = load_safetensors(path, [](const std::string& n) { return n == "small"; });
  test::require_equal(some.tensors.at("small"), small);
  // The kernel may read ahead a little around the page it maps for "small"; not the 8 MiB before it.
  CHECK(cached_pages(path, big_begin, big_end) < big_pages / 8);
  // And the measure sees a whole read.
  load_safetensors(path);
  CHECK(cached_pages(path, big_begin, big_end) == big_pages);
}

TEST_CASE("loading a missing file or a directory fails cleanly", "[safetensors][errors]") {
  TempDir dir;
  REQUIRE_THROWS_WITH(load_safetensors(dir.file("nope.safetensors")), Catch::Contains("cannot open"));
  REQUIRE_THROWS_WITH(load_safetensors(dir.path.string()), Catch::Contains("not a regular file"));
}

// ============================== atomic saves ==============================

TEST_CASE("a failed save leaves the existing file intact and no temporary file behind", "[safetensors][atomic]") {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  Tensor old_value = test::random({8, 8}, 11, DType::f32);
  save_safetensors(path, {{"w", old_value}}, {{"step", "1"}});
  const std::string old_bytes = read_bytes(path);
  Tensor new_value = test::random({8, 8}, 12, DType::f32);

  SECTION("the disk fills up part-way through") {
    // 0: nothing written; 5: inside the length; 40: inside the header; 200: inside the data.
    const int64_t budget = GENERATE(0, 5, 40, 200);
    testing::fail_next_save_after(budget);
    REQUIRE_THROWS_WITH(save_safetensors(path, {{"w", new_value}}, {{"step", "2"}}),
                        Catch::Contains("save_safetensors: '" + path) && Catch::Contains("write failed"));
  }
  SECTION("a tensor cannot be written") {
    REQUIRE_THROWS_WITH(save_safetensors(path, {{"w", new_value}, {"z", Tensor()}}),
                        Catch::Contains("tensor 'z' is an undefined tensor"));
  }
  SECTION("a name is invalid") {
    REQUIRE_THROWS_WITH(save_safetensors(path, {{"__metadata__", new_value}}), Catch::Contains("invalid tensor name"));
    REQUIRE_THROWS_WITH(save_safetensors(path, {{"", new_value}}), Catch::Contains("invalid tensor name"));
    REQUIRE_THROWS_WITH(save_safetensors(path, {{"w", new_value}}, {{"k", "\xc3"}}), Catch::Contains("not valid UTF-8"));
  }
  REQUIRE(read_bytes(path) == old_bytes);
  REQUIRE(dir.entries() == std::vector<std::string>{"model.safetensors"});
  Safetensors back = load_safetensors(path);
  require_same_tensor(back.tensors.at("w"), old_value);
  REQUIRE(back.metadata.at("step") == "1");

  // The hook fires once: the next save goes through and replaces the file.
  save_safetensors(path, {{"w", new_value}});
  require_same_tensor(load_safetensors(path).tensors.at("w"), new_value);
  REQUIRE(dir.entries() == std::vector<std::string>{"model.safetensors"});
}

TEST_CASE("saving into a missing directory fails cleanly", "[safetensors][atomic]") {
  TempDir dir;
  const std::string path = dir.file("missing/sub/model.safetensors");
  REQUIRE_THROWS_WITH(save_safetensors(path, {{"w", ones({2})}}),
                      Catch::Contains("cannot create the temporary file") && Catch::Contains("No such file or directory"));
  REQUIRE(dir.entries().empty());
}

// ============================== checkpoints ==============================

TEST_CASE("checkpoint round trip: model, optimizer state and metadata", "[checkpoint]") {
  TempDir dir;
  Tensor w = test::random({4, 3}, 20, DType::f32), b = test::random({3}, 21, DType::bf16);
  w.requires_grad_(true);
  b.requires_grad_(true);
  optim::AdamW opt({{"lin.weight", w}, {"lin.bias", b}}, {.lr = 0.01});
  w.set_grad(test::random({4, 3}, 22, DType::f32));
  b.set_grad(test::random({3}, 23, DType::bf16));
  opt.step();
  const std::map<std::string, Tensor> model = {{"lin.weight", w}, {"lin.bias", b}, {"buf", test::strided(ones({2, 2}))}};
  const optim::StateDict optim_state = opt.state_dict();

  const std::string path = dir.file("ckpt.safetensors");
  nn::save_checkpoint(path, model, optim_state, {{"step", "1"}, {"seed", "1234"}});
  nn::Checkpoint c = nn::load_checkpoint(path);
  REQUIRE(c.model.size() == model.size());
  for (const auto& [k, t] : model) require_same_tensor(c.model.at(k), t);
  REQUIRE(c.optimizer.size() == optim_state.size());
  for (const auto& [k, t] : optim_state) require_same_tensor(c.optimizer.at(k), t);
  REQUIRE(c.metadata == std::map<std::string, std::string>{{"step", "1"}, {"seed", "1234"}});

  // On disk the keys are prefixed, so other safetensors tools see one flat namespace.
  Safetensors raw_file = load_safetensors(path);
  REQUIRE(raw_file.tensors.count("model.lin.weight") == 1);
  REQUIRE(raw_file.tensors.count("optim.exp_avg.lin.weight") == 1);
  REQUIRE(raw_file.tensors.count("optim.step") == 1);
}

TEST_CASE("training resumed from a checkpoint file matches uninterrupted training bitwise", "[checkpoint]") {
  TempDir dir;
  auto grads_for_step = [](int step) {
    return std::pair{test::random({3, 3}, uint64_t(100 + step), DType::f32), test::random({3}, uint64_t(200 + step), DType::f32)};
  };
  auto train = [&](optim::AdamW& opt, Tensor w, Tensor b, int from, int to) {
    for (int s = from; s < to; ++s) {
      auto [gw, gb] = grads_for_step(s);
      w.set_grad(gw);
      b.set_grad(gb);
      opt.step();
    }
  };
  Tensor w = test::random({3, 3}, 30, DType::f32), b = test::random({3}, 31, DType::f32);
  optim::AdamW opt({{"w", w}, {"b", b}}, {.lr = 0.05});
  train(opt, w, b, 0, 4);
  const std::string path = dir.file("ckpt.safetensors");
  nn::save_checkpoint(path, {{"w", w}, {"b", b}}, opt.state_dict(), {{"step", "4"}});
  train(opt, w, b, 4, 8);

  nn::Checkpoint c = nn::load_checkpoint(path);
  Tensor w2 = c.model.at("w"), b2 = c.model.at("b");
  optim::AdamW resumed({{"w", w2}, {"b", b2}}, {.lr = 0.05});
  resumed.load_state_dict(c.optimizer);
  train(resumed, w2, b2, std::stoi(c.metadata.at("step")), 8);
  require_same_tensor(w2, w);
  require_same_tensor(b2, b);
}

TEST_CASE("load_checkpoint refuses files that are not brigade checkpoints", "[checkpoint][errors]") {
  TempDir dir;
  save_safetensors(dir.file("plain.safetensors"), {{"model.w", ones({2})}});
  REQUIRE_THROWS_WITH(nn::load_checkpoint(dir.file("plain.safetensors")), Catch::Contains("not a brigade checkpoint"));
  save_safetensors(dir.file("future.safetensors"), {{"model.w", ones({2})}}, {{"brigade.checkpoint", "99"}});
  REQUIRE_THROWS_WITH(nn::load_checkpoint(dir.file("future.safetensors")),
                      Catch::Contains("layout version 99; this build reads version 1"));
  save_safetensors(dir.file("stray.safetensors"), {{"other.w", ones({2})}}, {{"brigade.checkpoint", "1"}});
  REQUIRE_THROWS_WITH(nn::load_checkpoint(dir.file("stray.safetensors")),
                      Catch::Contains("holds tensor 'other.w', which has neither"));
  REQUIRE_THROWS_WITH(nn::save_checkpoint(dir.file("x.safetensors"), {}, {}, {{"brigade.mine", "1"}}),
                      Catch::Contains("metadata key 'brigade.mine' is reserved"));
  REQUIRE_THROWS_WITH(nn::load_checkpoint(dir.file("missing.safetensors")), Catch::Contains("cannot open"));
}
