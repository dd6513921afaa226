#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace brigade {

MappedFile::MappedFile(const std::string& path, const std::string& who, Access access) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(who, ": cannot open: ", std::strerror(errno));
  // The mapping keeps the file; the descriptor is not needed past mmap, on any path out.
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail(who, ": cannot stat: ", std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail(who, ": not a regular file");
  size_ = size_t(st.st_size);
  if (size_ == 0) return;  // mmap refuses an empty range
  void* map = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  if (map == MAP_FAILED) fail(who, ": cannot map it into memory: ", std::strerror(errno));
  map_ = map;
  if (access == Access::parts) ::madvise(map_, size_, MADV_RANDOM);  // a hint: failing it costs only speed
}

void MappedFile::prefetch(size_t offset, size_t length) const {
  if (map_ == nullptr || length == 0 || offset >= size_) return;
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  const size_t begin = offset / page * page;
  ::madvise(static_cast<char*>(map_) + begin, std::min(offset + length, size_) - begin, MADV_WILLNEED);
}

MappedFile::~MappedFile() {
  if (map_ != nullptr) ::munmap(map_, size_);
}

}  // namespace brigade
