#include "pipeline/atomic_file.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "core/error.h"

namespace brigade::pipeline {

void write_file_atomically(const std::string& path, const std::string& contents, const char* who) {
  // Unique per process (pid) and per call (counter), so concurrent saves never share a temporary.
  static std::atomic<unsigned> counter{0};
  const std::string temp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    BRIGADE_CHECK(out.good(), who, ": cannot create '", temp, "': ", std::strerror(errno));
    out << contents;
    out.flush();
    if (!out.good()) {
      out.close();
      std::remove(temp.c_str());
      fail(who, ": cannot write '", temp, "'");
    }
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(temp.c_str());
    fail(who, ": cannot rename '", temp, "' to '", path, "': ", why);
  }
}

}  // namespace brigade::pipeline
