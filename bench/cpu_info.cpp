#include "bench/cpu_info.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

namespace brigade::bench {
namespace {

std::string trim(const std::string& s) {
  const size_t begin = s.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t\r\n") - begin + 1);
}

// The whole file as text; empty when it cannot be read (sysfs and procfs entries are optional).
std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The last-level cache from sysfs: the highest-level data or unified cache of cpu0, times the number
// of its instances (an AMD EPYC has one L3 per core complex; the threads brigade runs on may span
// several, and a flush must cover them all). 0 when sysfs has no cache description.
size_t last_level_cache_bytes(int logical_cores) {
  int best_level = 0;
  size_t best_bytes = 0;
  int sharing = 1;
  for (int index = 0; index < 16; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    const std::string level_text = trim(read_text(dir + "level"));
    if (level_text.empty()) break;
    const std::string type = trim(read_text(dir + "type"));
    if (type != "Data" && type != "Unified") continue;
    const int level = std::atoi(level_text.c_str());
    const size_t bytes = parse_cache_size(trim(read_text(dir + "size")));
    if (level > best_level && bytes > 0) {
      best_level = level;
      best_bytes = bytes;
      sharing = count_cpu_list(trim(read_text(dir + "shared_cpu_list")));
    }
  }
  if (best_bytes == 0) return 0;
  const int instances = sharing > 0 && logical_cores > sharing ? (logical_cores + sharing - 1) / sharing : 1;
  return best_bytes * size_t(instances);
}

}  // namespace

std::string cpu_model_name(const std::string& cpuinfo_text) {
  std::istringstream lines(cpuinfo_text);
  for (std::string line; std::getline(lines, line);) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = trim(line.substr(0, colon));
    if (key == "model name" || key == "Processor" || key == "cpu model") {
      const std::string value = trim(line.substr(colon + 1));
      if (!value.empty()) return value;
    }
  }
  return "";
}

size_t parse_cache_size(const std::string& text) {
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return 0;
  size_t end = 0;
  const unsigned long long value = std::stoull(text, &end);
  const std::string unit = text.substr(end);
  if (unit.empty()) return size_t(value);
  if (unit == "K") return size_t(value) << 10;
  if (unit == "M") return size_t(value) << 20;
  if (unit == "G") return size_t(value) << 30;
  return 0;
}

int count_cpu_list(const std::string& text) {
  int count = 0;
  std::istringstream ranges(text);
  for (std::string range; std::getline(ranges, range, ',');) {
    int first = 0, last = 0;
    char dash = 0, extra = 0;
    std::istringstream r(range);
    if (!(r >> first)) return 0;
    if (r >> dash) {
      if (dash != '-' || !(r >> last) || r >> extra || last < first) return 0;
    } else {
      last = first;
    }
    count += last - first + 1;
  }
  return count;
}

CpuInfo describe_cpu() {
  CpuInfo info;
  info.name = cpu_model_name(read_text("/proc/cpuinfo"));
  if (info.name.empty()) info.name = "unknown";
  info.logical_cores = int(std::max(1u, std::thread::hardware_concurrency()));
  info.llc_bytes = last_level_cache_bytes(info.logical_cores);
  if (info.llc_bytes == 0) info.llc_bytes = size_t(32) << 20;  // a typical server LLC: the stated fallback
  return info;
}

}  // namespace brigade::bench
