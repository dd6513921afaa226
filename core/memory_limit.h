// How much device memory a process may reserve, as a person writes it: a size ("12GiB", "512MiB",
// "4096") or a fraction of the device ("0.25"). The CUDA caching allocator enforces it
// (core/cuda/caching_allocator.h); the BRIGADE_CUDA_MEMORY_LIMIT variable and `brigade train
// --memory-limit` are parsed here, so both accept the same spellings.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace brigade {

// The environment variable the CUDA allocator reads at its first allocation.
inline constexpr const char* kCudaMemoryLimitVariable = "BRIGADE_CUDA_MEMORY_LIMIT";

// A number with an optional unit, B, KiB, MiB, GiB, TiB (powers of 1024) or KB, MB, GB, TB (powers
// of 1000): "80GiB" -> 85899345920, "1.5GB" -> 1.5e9. Nothing when `text` is not of that form.
std::optional<double> parse_byte_size(const std::string& text);

// Exactly one of the two is set; both zero means no limit.
struct DeviceMemoryLimit {
  size_t bytes = 0;     // an absolute size
  double fraction = 0;  // of the device's total memory, in (0, 1]

  bool none() const { return bytes == 0 && fraction == 0; }
  // The limit on a device of `total` bytes (0: none). A fraction of an unknown total (0) is an error.
  size_t resolve(size_t total, const std::string& what) const;
  std::string str() const;  // "512.00 MiB", "0.25 of the device"
};

// `text` as a size (at least one byte) or a fraction in (0, 1]. A number without a unit up to 1 is a
// fraction ("1" is the whole device), above it a whole number of bytes ("1.5" is neither).
// Throws Error naming `what` (a flag, or the variable) and the accepted spellings otherwise.
DeviceMemoryLimit parse_memory_limit(const std::string& what, const std::string& text);

}  // namespace brigade
