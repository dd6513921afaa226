// core/'s small utilities, which other layers share: JSON literals and the strict reader
// (core/json.h), files written atomically (core/atomic_file.h), numbers for people (core/format.h).
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "core/format.h"
#include "core/json.h"

using namespace brigade;

// ---- JSON ----------------------------------------------------------------------------------------

TEST_CASE("json_string and parse_json round-trip any UTF-8 text", "[core][json]") {
  const std::string text = "quote \" backslash \\ slash / tab\t newline\n bell\x07 caf\xC3\xA9 \xF0\x9F\x98\x80";
  const std::string literal = json_string(text);
  REQUIRE(literal.find('\n') == std::string::npos);  // control characters are escaped, never raw
  REQUIRE(literal.find('\x07') == std::string::npos);
  const Json back = parse_json(literal);
  REQUIRE(back.kind == Json::Kind::string);
  REQUIRE(back.string == text);
  REQUIRE(parse_json(R"("caf\u00e9\ud83d\ude00")").string == "caf\xC3\xA9\xF0\x9F\x98\x80");
}

TEST_CASE("json_number is the shortest text that reads back exactly; null where JSON has no number",
          "[core][json]") {
  for (double v : {0.0, 0.2, -3950.7, 1e-7, 1.0 / 3, 6.02214076e23, 1e300})
    REQUIRE(parse_json(json_number(v)).number == v);
  REQUIRE(json_number(0.2) == "0.2");
  REQUIRE(json_number(42) == "42");
  REQUIRE(json_number(std::nan("")) == "null");
  REQUIRE(json_number(-INFINITY) == "null");
}

TEST_CASE("parse_json reads every kind of value and keeps integers exact", "[core][json]") {
  const Json doc = parse_json(R"( {"a": [1, -2.5e1, true, false, null], "big": 18446744073709551615, "o": {}} )");
  REQUIRE(doc.kind == Json::Kind::object);
  const Json& a = doc["a"];
  REQUIRE(a.items.size() == 5);
  REQUIRE(a[0].as_number() == 1);
  REQUIRE(a[1].as_number() == -25);
  REQUIRE(!a[1].integer);
  REQUIRE((a[2].kind == Json::Kind::boolean && a[2].boolean));
  REQUIRE((a[3].kind == Json::Kind::boolean && !a[3].boolean));
  REQUIRE(a[4].kind == Json::Kind::null);
  REQUIRE(doc["big"].integer);
  REQUIRE(doc["big"].magnitude == UINT64_MAX);  // beyond a double's 53 bits, still exact
  REQUIRE(doc["o"].members.empty());
  REQUIRE_THROWS_WITH(doc["missing"], Catch::Contains("no member 'missing'"));
  REQUIRE_THROWS_WITH(a[5], Catch::Contains("item 5 of an array of 5"));
  REQUIRE_THROWS_WITH(a[4].as_number(), Catch::Contains("expected a number"));
}

TEST_CASE("parse_json refuses what RFC 8259 does not allow, naming the byte", "[core][json]") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "at byte 0: unexpected end"},
      {"[1,]", "at byte 3: unexpected character ']'"},
      {"{\"a\":1,}", "expected a string key"},
      {"{\"a\" 1}", "expected ':'"},
      {"{\"a\":1,\"a\":2}", "at byte 7: duplicate key 'a'"},
      {"01", "leading zeros"},
      {"1.", "expected a digit after '.'"},
      {"1e", "expected a digit in the exponent"},
      {"1e999", "out of the range of a double"},
      {"\"a\nb\"", "control character inside a string"},
      {"\"\\x\"", "invalid escape '\\x'"},
      {"\"\\udc00\"", "unpaired surrogate"},
      {"\"\xff\"", "not valid UTF-8"},
      {"nul", "unexpected character 'n'"},
      {"[1] 2", "unexpected data after the JSON value"},
      {std::string(100, '['), "nesting is too deep (more than 64 levels"},
  };
  for (const auto& [text, message] : cases) {
    INFO(text);
    REQUIRE_THROWS_WITH(parse_json(text), Catch::Contains("invalid JSON document") && Catch::Contains(message));
  }
}

TEST_CASE("JsonLimits narrow the grammar for a file format", "[core][json]") {
  JsonLimits header;
  header.context = "reader: 'x'";
  header.document = "header";
  header.max_depth = 2;
  header.object_root = true;
  header.literals = false;
  header.fractions = false;
  header.duplicate_keys = true;
  REQUIRE(parse_json(R"({"a":1,"a":[]})", header).members.size() == 2);  // repeats kept, for the format to name
  REQUIRE_THROWS_WITH(parse_json("[1]", header),
                      Catch::Contains("reader: 'x': invalid JSON header at byte 0: the header must be a JSON object"));
  REQUIRE_THROWS_WITH(parse_json(R"({"a":true})", header),
                      Catch::Contains("unexpected character 't' (a header holds only objects, arrays, strings and "
                                      "integers)"));
  REQUIRE_THROWS_WITH(parse_json(R"({"a":1.5})", header), Catch::Contains("numbers in a header must be integers"));
  REQUIRE_THROWS_WITH(parse_json(R"({"a":18446744073709551616})", header), Catch::Contains("number is too large"));
  REQUIRE_THROWS_WITH(parse_json(R"({"a":[[1]]})", header), Catch::Contains("nesting is too deep"));
}

// ---- atomic files --------------------------------------------------------------------------------

namespace {

std::vector<std::string> files_in(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string contents_of(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE("AtomicFile: the target changes only on commit, and no temporary is left", "[core][atomic_file]") {
  const auto dir = std::filesystem::temp_directory_path() / ("brigade-atomic-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "out.txt").string();
  write_file_atomically(path, "old", "test");
  {
    AtomicFile file(path, "test");
    // Named so that tools/train/checkpoint_dir.cpp can tell it from a finished file.
    REQUIRE(file.temp_path().rfind(path + ".tmp." + std::to_string(::getpid()) + ".", 0) == 0);
    file.write("new, half written");
    REQUIRE(contents_of(path) == "old");
  }  // abandoned: an exception on the way would do the same
  REQUIRE(contents_of(path) == "old");
  REQUIRE(files_in(dir) == std::vector<std::string>{"out.txt"});
  write_file_atomically(path, "new", "test");
  REQUIRE(contents_of(path) == "new");
  REQUIRE(files_in(dir) == std::vector<std::string>{"out.txt"});
  REQUIRE_THROWS_WITH(write_file_atomically((dir / "missing" / "x").string(), "x", "save_x"),
                      Catch::Contains("save_x: cannot create the temporary file") &&
                          Catch::Contains("No such file or directory"));
  std::filesystem::remove_all(dir);
}

// ---- numbers for people ---------------------------------------------------------------------------

TEST_CASE("with_commas, format_bytes, format_fixed and format_significant", "[core][format]") {
  REQUIRE(with_commas(0) == "0");
  REQUIRE(with_commas(999) == "999");
  REQUIRE(with_commas(1000) == "1,000");
  REQUIRE(with_commas(124439808) == "124,439,808");
  REQUIRE(with_commas(-123) == "-123");
  REQUIRE(with_commas(-1234567) == "-1,234,567");
  REQUIRE(with_commas(INT64_MIN) == "-9,223,372,036,854,775,808");
  REQUIRE(format_bytes(0) == "0 B");
  REQUIRE(format_bytes(1023) == "1023 B");
  REQUIRE(format_bytes(2500) == "2.4 KiB");
  REQUIRE(format_bytes(48.0 * 1024 * 1024) == "48.0 MiB");
  REQUIRE(format_bytes(1536, 2) == "1.50 KiB");
  REQUIRE(format_bytes(3.0 * 1024 * 1024 * 1024 * 1024 * 1024 * 1024) == "3072.0 PiB");  // PiB is the last unit
  REQUIRE(format_fixed(0.157894, 4) == "0.1579");
  REQUIRE(format_fixed(2, 1) == "2.0");
  REQUIRE(format_fixed(1e300, 2).size() == 304);  // never cut short
  REQUIRE(format_significant(57, 4) == "57");
  REQUIRE(format_significant(1.0 / 3, 4) == "0.3333");
  REQUIRE(format_significant(1234567, 4) == "1.235e+06");
}
