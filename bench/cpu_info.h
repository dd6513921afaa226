// What a CPU benchmark needs to know about the host: its name (for the report), and the size of its
// last-level cache (to size buffers that must not fit in it: the copy ceiling, the cache flush
// before each timed repeat).
#pragma once

#include <cstddef>
#include <string>

namespace brigade::bench {

struct CpuInfo {
  std::string name;        // "AMD EPYC 7B13", from /proc/cpuinfo; "unknown" when it has none
  int logical_cores = 0;   // hardware threads the OS offers
  size_t llc_bytes = 0;    // the last-level cache, all of its instances together
};

// Reads /proc/cpuinfo and /sys/devices/system/cpu/cpu0/cache; what cannot be read gets a stated
// fallback (name "unknown", a 32 MiB cache), so a benchmark still runs on an unusual system.
CpuInfo describe_cpu();

// The first "model name" (x86) or "Processor"/"cpu model" line's value in /proc/cpuinfo's text;
// empty when there is none.
std::string cpu_model_name(const std::string& cpuinfo_text);

// A sysfs cache size, "32768K" / "1M" / "512", in bytes; 0 when the text is not one.
size_t parse_cache_size(const std::string& text);

// How many CPUs a sysfs CPU list names: "0-1" -> 2, "0-7,64-71" -> 16, "3" -> 1; 0 when malformed.
int count_cpu_list(const std::string& text);

}  // namespace brigade::bench
