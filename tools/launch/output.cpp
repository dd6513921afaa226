#include "launch/output.h"

namespace brigade::launch {

std::string LinePrefixer::feed(const char* data, size_t n) {
  std::string lines;
  for (size_t i = 0; i < n; ++i) {
    partial_ += data[i];
    if (data[i] != '\n') continue;
    lines += prefix_;
    lines += partial_;
    partial_.clear();
  }
  return lines;
}

std::string LinePrefixer::flush() {
  if (partial_.empty()) return "";
  std::string line = prefix_ + partial_ + "\n";
  partial_.clear();
  return line;
}

}  // namespace brigade::launch
