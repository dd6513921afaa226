#include "core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "core/error.h"

namespace brigade {

namespace {

std::string errno_text() { return std::strerror(errno); }

std::string parent_directory(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

AtomicFile::AtomicFile(std::string path, std::string who) : path_(std::move(path)), who_(std::move(who)) {
  static std::atomic<uint64_t> counter{0};
  temp_ = path_ + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  BRIGADE_CHECK(fd_ >= 0, who_, ": cannot create the temporary file '", temp_, "': ", errno_text());
}

AtomicFile::~AtomicFile() {
  if (committed_) return;
  if (fd_ >= 0) ::close(fd_);
  ::unlink(temp_.c_str());
}

void AtomicFile::write(const void* data, size_t bytes) {
  BRIGADE_CHECK(fd_ >= 0, who_, ": write after commit");
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t w = ::write(fd_, p, bytes);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) fail(who_, ": write failed: ", errno_text());
    p += w;
    bytes -= size_t(w);
  }
}

void AtomicFile::commit() {
  BRIGADE_CHECK(fd_ >= 0, who_, ": committed twice");
  // Data must be on disk before the rename makes it visible; otherwise a crash could leave the new
  // name pointing at an incomplete file.
  BRIGADE_CHECK(::fsync(fd_) == 0, who_, ": fsync failed: ", errno_text());
  const int fd = std::exchange(fd_, -1);
  BRIGADE_CHECK(::close(fd) == 0, who_, ": close failed: ", errno_text());
  BRIGADE_CHECK(::rename(temp_.c_str(), path_.c_str()) == 0, who_, ": cannot rename '", temp_, "' to '", path_,
                "': ", errno_text());
  committed_ = true;
  // The rename itself is recorded in the directory, so flush the directory too (best effort where the
  // file system does not support it).
  const int dir = ::open(parent_directory(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return;
  const bool synced = ::fsync(dir) == 0 || errno == EINVAL;
  const std::string why = synced ? "" : errno_text();
  ::close(dir);
  BRIGADE_CHECK(synced, who_, ": fsync of the directory failed: ", why);
}

void write_file_atomically(const std::string& path, const std::string& contents, const std::string& who) {
  AtomicFile file(path, who);
  file.write(contents);
  file.commit();
}

}  // namespace brigade
