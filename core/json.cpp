// JSON literals and the strict reader (see json.h).
#include "core/json.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <set>
#include <utility>

#include "core/error.h"
#include "core/utf8.h"

namespace brigade {

namespace {

// JSON's two-character escapes: a character, and the letter that stands for it after a backslash.
// The writer and the reader share this one table.
constexpr std::pair<char, char> kShortEscapes[] = {
    {'"', '"'}, {'\\', '\\'}, {'\b', 'b'}, {'\f', 'f'}, {'\n', 'n'}, {'\r', 'r'}, {'\t', 't'}};

// The letter that escapes `c` in a string, or 0 where `c` is written as it is (or as \u00XX).
char escape_letter(char c) {
  for (const auto& [character, letter] : kShortEscapes)
    if (character == c) return letter;
  return 0;
}

// The character a backslash and `letter` stand for, or 0 for an invalid escape. "\/" is valid too:
// some writers escape '/' (to keep "</" out of HTML), though nothing requires it.
char unescape_letter(char letter) {
  if (letter == '/') return '/';
  for (const auto& [character, l] : kShortEscapes)
    if (l == letter) return character;
  return 0;
}

}  // namespace

// ================================ writing ================================

std::string json_string(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (const char c : text) {
    if (const char letter = escape_letter(c)) {
      out += '\\';
      out += letter;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += "\\u00";
      out += kHex[(c >> 4) & 0xF];
      out += kHex[c & 0xF];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string json_number(double value) {
  if (!std::isfinite(value)) return "null";
  char text[64];
  const auto [end, ec] = std::to_chars(text, text + sizeof text, value);  // shortest round-trip form
  return ec == std::errc() ? std::string(text, end) : "null";
}

// ================================ reading ================================

const Json& Json::operator[](const std::string& key) const {
  BRIGADE_CHECK(kind == Kind::object, "JSON: looked up member '", key, "' in a value that is not an object");
  for (const auto& [k, v] : members)
    if (k == key) return v;
  fail("JSON: the object has no member '", key, "'");
}

const Json& Json::operator[](size_t i) const {
  BRIGADE_CHECK(kind == Kind::array, "JSON: looked up item ", i, " in a value that is not an array");
  BRIGADE_CHECK(i < items.size(), "JSON: item ", i, " of an array of ", items.size());
  return items[i];
}

double Json::as_number() const {
  BRIGADE_CHECK(kind == Kind::number, "JSON: expected a number");
  return number;
}

namespace {

class Parser {
 public:
  Parser(std::string_view text, const JsonLimits& limits) : s_(text), limits_(limits) {}

  Json parse_document() {
    skip_space();
    if (limits_.object_root && peek() != '{') error("the " + limits_.document + " must be a JSON object");
    Json root = parse_value(0);
    skip_space();
    if (pos_ != s_.size())
      error(std::string("unexpected data after the JSON ") + (root.kind == Json::Kind::object ? "object" : "value"));
    return root;
  }

 private:
  [[noreturn]] void error(const std::string& what) const {
    fail(limits_.context, limits_.context.empty() ? "" : ": ", "invalid JSON ", limits_.document, " at byte ", pos_,
         ": ", what);
  }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  bool at_end() const { return pos_ >= s_.size(); }
  static bool is_digit(char c) { return c >= '0' && c <= '9'; }
  void skip_space() {
    while (!at_end() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  void expect(char c) {
    if (at_end() || s_[pos_] != c) error(std::string("expected '") + c + "'");
    ++pos_;
  }
  bool take(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  // What the narrowed grammar holds, for the message that refuses anything else.
  std::string allowed_kinds() const {
    if (limits_.literals) return "";
    return " (a " + limits_.document + " holds only objects, arrays, strings and " +
           (limits_.fractions ? "numbers" : "integers") + ")";
  }

  Json parse_value(int depth) {
    // Recursion is bounded by the limit, not by the input: a hostile "[[[[..." cannot exhaust the stack.
    if (depth >= limits_.max_depth)
      error("nesting is too deep (more than " + std::to_string(limits_.max_depth) + " levels in a " +
            limits_.document + ")");
    skip_space();
    if (at_end()) error("unexpected end of the " + limits_.document);
    const char c = peek();
    if (c == '{') return parse_object(depth);
    if (c == '[') return parse_array(depth);
    if (c == '"') {
      Json v;
      v.kind = Json::Kind::string;
      v.string = parse_string();
      return v;
    }
    if (c == '-' || is_digit(c)) return parse_number();
    if (limits_.literals) {
      Json v;
      if (take("null")) return v;
      v.kind = Json::Kind::boolean;
      v.boolean = true;
      if (take("true")) return v;
      v.boolean = false;
      if (take("false")) return v;
    }
    error(std::string("unexpected character '") + c + "'" + allowed_kinds());
  }

  // open item (',' item)* close, or open close: the shape of both objects and arrays.
  template <class ParseItem>
  void parse_list(char open, char close, ParseItem parse_item) {
    expect(open);
    skip_space();
    if (peek() == close) {
      ++pos_;
      return;
    }
    while (true) {
      parse_item();
      skip_space();
      if (peek() != ',') break;
      ++pos_;
    }
    expect(close);
  }

  Json parse_object(int depth) {
    Json v;
    v.kind = Json::Kind::object;
    std::set<std::string> keys;  // only when repeats are refused
    parse_list('{', '}', [&] {
      skip_space();
      if (peek() != '"') error("expected a string key");
      const size_t key_at = pos_;
      std::string key = parse_string();
      if (!limits_.duplicate_keys && !keys.insert(key).second) {
        pos_ = key_at;
        error("duplicate key '" + key + "'");
      }
      skip_space();
      expect(':');
      v.members.emplace_back(std::move(key), parse_value(depth + 1));
    });
    return v;
  }

  Json parse_array(int depth) {
    Json v;
    v.kind = Json::Kind::array;
    parse_list('[', ']', [&] { v.items.push_back(parse_value(depth + 1)); });
    return v;
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

  // The code point of a \\u escape (after the 'u'), a surrogate pair taken together.
  uint32_t parse_code_point() {
    uint32_t cp = parse_hex4();
    if (cp >= 0xDC00 && cp <= 0xDFFF) error("unpaired surrogate in \\u escape");
    if (cp >= 0xD800 && cp <= 0xDBFF) {  // a high surrogate: a low one must follow
      if (pos_ + 2 > s_.size() || s_[pos_] != '\\' || s_[pos_ + 1] != 'u') error("unpaired surrogate in \\u escape");
      pos_ += 2;
      const uint32_t low = parse_hex4();
      if (low < 0xDC00 || low > 0xDFFF) error("unpaired surrogate in \\u escape");
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
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
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at_end()) error("unterminated escape");
      const char e = s_[pos_++];
      if (e == 'u') {
        append_utf8(out, parse_code_point());
      } else if (const char c = unescape_letter(e)) {
        out += c;
      } else {
        error(std::string("invalid escape '\\") + e + "'");
      }
    }
    if (!is_utf8(out)) error("string is not valid UTF-8");
    return out;
  }

  // -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?, with the integer part also kept exactly.
  Json parse_number() {
    Json v;
    v.kind = Json::Kind::number;
    v.integer = true;
    const size_t start = pos_;
    if (peek() == '-') {
      v.negative = true;
      ++pos_;
    }
    if (!is_digit(peek())) error("expected a digit");
    if (peek() == '0' && pos_ + 1 < s_.size() && is_digit(s_[pos_ + 1])) error("numbers must not have leading zeros");
    while (is_digit(peek())) {
      const uint64_t digit = uint64_t(s_[pos_++] - '0');
      if (v.integer && v.magnitude > (std::numeric_limits<uint64_t>::max() - digit) / 10) {
        if (!limits_.fractions) error("number is too large");
        v.integer = false;  // still a number, only not an exact one
      }
      if (v.integer) v.magnitude = v.magnitude * 10 + digit;
    }
    if (peek() == '.' || peek() == 'e' || peek() == 'E') {
      if (!limits_.fractions) error("numbers in a " + limits_.document + " must be integers");
      v.integer = false;
      if (peek() == '.') {
        ++pos_;
        if (!is_digit(peek())) error("expected a digit after '.'");
        while (is_digit(peek())) ++pos_;
      }
      if (peek() == 'e' || peek() == 'E') {
        ++pos_;
        if (peek() == '+' || peek() == '-') ++pos_;
        if (!is_digit(peek())) error("expected a digit in the exponent");
        while (is_digit(peek())) ++pos_;
      }
    }
    if (!v.integer) {
      v.negative = false;
      v.magnitude = 0;
    }
    // from_chars: correctly rounded and independent of the C locale's decimal point.
    const auto [end, ec] = std::from_chars(s_.data() + start, s_.data() + pos_, v.number);
    if (ec != std::errc() || end != s_.data() + pos_) error("number is out of the range of a double");
    return v;
  }

  std::string_view s_;
  const JsonLimits& limits_;
  size_t pos_ = 0;
};

}  // namespace

Json parse_json(std::string_view text, const JsonLimits& limits) { return Parser(text, limits).parse_document(); }

}  // namespace brigade
