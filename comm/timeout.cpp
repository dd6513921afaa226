#include "comm/timeout.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"

namespace brigade::comm {

Milliseconds parse_seconds(const std::string& text, const std::string& what) {
  char* end = nullptr;
  double seconds = std::strtod(text.c_str(), &end);
  bool valid = !text.empty() && end == text.c_str() + text.size() && std::isfinite(seconds) && seconds > 0;
  BRIGADE_CHECK(valid, what, ": expected a positive number of seconds, got '", text, "'");
  return Milliseconds(std::max<long long>(1, std::llround(seconds * 1000)));
}

Milliseconds default_timeout() {
  const char* value = std::getenv("BRIGADE_COMM_TIMEOUT");
  if (value == nullptr || *value == '\0') return std::chrono::seconds(300);
  return parse_seconds(value, "BRIGADE_COMM_TIMEOUT");
}

Milliseconds connect_timeout(Milliseconds call_timeout, std::optional<Milliseconds> chosen) {
  if (chosen) return *chosen;
  const char* value = std::getenv("BRIGADE_CONNECT_TIMEOUT");
  if (value != nullptr && *value != '\0') return parse_seconds(value, "BRIGADE_CONNECT_TIMEOUT");
  return std::max<Milliseconds>(call_timeout, std::chrono::seconds(60));
}

std::string seconds_str(Milliseconds ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", double(ms.count()) / 1000.0);
  return text;
}

Milliseconds Deadline::remaining() const {
  // Rounded up: a library told to wait this long then returns after the deadline, never a fraction
  // of a millisecond before it — so "did the deadline pass?" reliably tells a timeout from a failure.
  auto left = std::chrono::ceil<Milliseconds>(at_ - Clock::now());
  return std::max(left, Milliseconds(1));
}

}  // namespace brigade::comm
