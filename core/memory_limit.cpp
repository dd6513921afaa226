#include "core/memory_limit.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <utility>

#include "core/error.h"
#include "core/format.h"

namespace brigade {

std::optional<double> parse_byte_size(const std::string& text) {
  static const std::pair<const char*, double> units[] = {
      {"TiB", 1099511627776.0}, {"GiB", 1073741824.0}, {"MiB", 1048576.0}, {"KiB", 1024.0}, {"TB", 1e12},
      {"GB", 1e9},              {"MB", 1e6},           {"KB", 1e3},        {"B", 1.0}};
  std::string number = text;
  double scale = 1;
  for (const auto& [suffix, factor] : units) {
    const std::string unit = suffix;
    if (number.size() > unit.size() && number.compare(number.size() - unit.size(), unit.size(), unit) == 0) {
      number.resize(number.size() - unit.size());
      scale = factor;
      break;
    }
  }
  double v = 0;
  auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), v);
  if (ec != std::errc() || end != number.data() + number.size() || !std::isfinite(v * scale)) return std::nullopt;
  return v * scale;
}

DeviceMemoryLimit parse_memory_limit(const std::string& what, const std::string& text) {
  const bool has_unit = !text.empty() && !std::isdigit(static_cast<unsigned char>(text.back())) && text.back() != '.';
  const std::optional<double> v = parse_byte_size(text);
  DeviceMemoryLimit limit;
  if (v && !has_unit && *v > 0 && *v <= 1) {
    limit.fraction = *v;
    return limit;
  }
  const bool whole = has_unit || (v && *v == std::floor(*v));  // "1.5" is no byte count, nor a fraction
  BRIGADE_CHECK(v && whole && *v >= 1 && *v <= 9e18, what, ": expected a size such as 512MiB, 12GiB or 1.5GB, or a fraction of "
                "the device in (0, 1] such as 0.25; got '", text, "'");
  limit.bytes = size_t(*v);
  return limit;
}

size_t DeviceMemoryLimit::resolve(size_t total, const std::string& what) const {
  if (fraction == 0) return bytes;
  BRIGADE_CHECK(total > 0, what, ": a limit of ", fraction,
                " of the device needs its total memory, which is unknown; give a size such as 12GiB");
  return std::max<size_t>(1, size_t(double(total) * fraction));
}

std::string DeviceMemoryLimit::str() const {
  if (fraction > 0) return format_significant(fraction, 4) + " of the device";
  return none() ? std::string("none") : format_bytes(double(bytes), 2);
}

}  // namespace brigade
