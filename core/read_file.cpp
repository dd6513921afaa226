#include "core/read_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace brigade {

std::string read_file(const std::string& path, const std::string& who) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  BRIGADE_CHECK(fd >= 0, who, ": cannot open '", path, "': ", std::strerror(errno));
  std::string out;
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      fail(who, ": cannot read '", path, "': ", std::strerror(error));
    }
    if (n == 0) break;
    out.append(buffer, size_t(n));
  }
  ::close(fd);
  return out;
}

}  // namespace brigade
