// Relaying the ranks' output: every line a rank writes comes out prefixed with its rank.
//
// Pipes deliver bytes in arbitrary chunks — half a line now, the rest later — so each (rank, stream)
// keeps its unfinished line until the newline arrives. Whole lines are written with one write() so
// lines of different ranks never interleave mid-line.
#pragma once

#include <string>

namespace brigade::launch {

class LinePrefixer {
 public:
  explicit LinePrefixer(std::string prefix) : prefix_(std::move(prefix)) {}
  // Returns the complete lines found so far, each prefixed (and newline-terminated).
  std::string feed(const char* data, size_t n);
  // At end of stream: the unfinished last line, prefixed and given a newline; empty if none.
  std::string flush();

 private:
  std::string prefix_;
  std::string partial_;
};

}  // namespace brigade::launch
