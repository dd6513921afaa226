// JSON: the literals every writer needs, and one strict reader.
//
// brigade writes JSON in several places — safetensors headers, Chrome traces, benchmark reports —
// and each lays out its own document, because the layout is part of that file's format. What they
// share is how a string is escaped and how a number is spelled, so those two come from here and are
// the same everywhere.
//
// It reads JSON in one place that matters, the safetensors header of a file that may be hostile, and
// tests read the other files back. One reader serves both: it accepts exactly RFC 8259 (nothing
// lenient: no trailing commas, no leading zeros, no raw control characters in strings), decodes
// \u escapes to UTF-8, checks that every string is valid UTF-8, and bounds its recursion. A file
// format narrows it further with JsonLimits, so that what the format cannot hold is refused while
// parsing, with an Error naming the byte — never a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace brigade {

// ---- writing ----

// A JSON string literal for `text` (UTF-8), quotes included: '"' and '\' are escaped, control
// characters become \b \f \n \r \t or \u00XX, every other byte is copied.
std::string json_string(std::string_view text);

// A JSON number: the shortest text that reads back as the same double ("0.2", "3950.7", "1e+20").
// NaN and the infinities have no JSON spelling and are written as null.
std::string json_number(double value);

// ---- reading ----

// A parsed value. Only the fields of its kind are meaningful.
struct Json {
  enum class Kind { null, boolean, number, string, array, object };
  Kind kind = Kind::null;

  bool boolean = false;
  // A number, rounded to the nearest double. Integers (no fraction, no exponent) below 2^64 are also
  // kept exactly, the sign apart from the magnitude, so that a reader of sizes and offsets can say
  // "negative" or "too large" instead of silently rounding or wrapping.
  double number = 0;
  bool integer = false;
  bool negative = false;
  uint64_t magnitude = 0;
  std::string string;
  std::vector<Json> items;                            // array
  std::vector<std::pair<std::string, Json>> members;  // object, in document order

  // The member named `key` (the first, where JsonLimits allows repeats) / the array item `i`.
  // Throws Error when this is not an object (an array), or the member (item) is missing.
  const Json& operator[](const std::string& key) const;
  const Json& operator[](size_t i) const;
  // The number; throws Error when this is not one (a missing value read as 0 would pass checks).
  double as_number() const;
};

// What a reader accepts on top of the grammar, and how its errors name the text. The defaults read
// any JSON document; a format narrows them (see core/safetensors.cpp).
struct JsonLimits {
  std::string context;                 // starts every error message: "load_safetensors: 'a.safetensors'"
  std::string document = "document";   // what the text is, in errors: "invalid JSON header at byte 7: ..."
  int max_depth = 64;                  // levels of nested values, the root being the first
  bool object_root = false;            // the text must be one object
  bool literals = true;                // true, false and null
  bool fractions = true;               // numbers with a fraction or an exponent; when false, integers
                                       // must also fit in 64 bits
  bool duplicate_keys = false;         // an object may repeat a key (members keeps every copy), for a
                                       // format that reports repeats in its own words
};

// Parses `text`: one value, with optional whitespace around it. Throws Error
// "<context>: invalid JSON <document> at byte N: <what is wrong>".
Json parse_json(std::string_view text, const JsonLimits& limits = {});

}  // namespace brigade
