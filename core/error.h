// brigade::Error — the one exception type every layer throws.
//
// Bad input must never crash, corrupt memory or abort: each op checks its arguments once and throws
// an Error whose text names the operation and what is wrong (the shapes, dtypes, devices or indices
// involved). Tests match on that text, so keep messages specific.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace brigade {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Concatenates its arguments with operator<< and throws them as an Error.
template <class... Args>
[[noreturn]] void fail(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  throw Error(os.str());
}

}  // namespace brigade

// BRIGADE_CHECK(cond, "op: ", detail, ...) throws brigade::Error with the message when cond is false.
#define BRIGADE_CHECK(cond, ...)                    \
  do {                                              \
    if (!(cond)) ::brigade::fail(__VA_ARGS__);      \
  } while (0)
