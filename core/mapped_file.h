// A file mapped read-only into memory, for readers that need only some of a large file's bytes.
//
// Mapping reads nothing up front: a page comes from disk (or the page cache) when it is first
// touched, so a reader that copies a few byte ranges out of a file — a pipeline rank taking its own
// layers from a checkpoint shard (core/safetensors.h) — reads those pages and no others. (A token
// shard, data/token_shard.h, is checked whole when opened, so every page of it is read once.) The pages are the page cache's, shared
// by every process that maps the file, never copies on the heap.
//
// The file must not shrink while it is mapped (touching a page past its new end raises SIGBUS).
// brigade replaces its files atomically (core/atomic_file.h: a new file renamed over the old), which
// leaves a mapped old file whole.
#pragma once

#include <cstddef>
#include <string>

namespace brigade {

class MappedFile {
 public:
  // How the reader will go through the file. The kernel reads ahead around every page first touched
  // (as much as the device's read-ahead, often megabytes): right for a file read whole, but it would
  // pull in the neighbours of a part. So `parts` turns that off and the reader asks for each range
  // it wants with prefetch().
  enum class Access { whole, parts };

  // Opens and maps `path`. Errors start with `who` ("token shard 'a.bin'") and give the system's
  // reason: cannot open, cannot stat, not a regular file, cannot map. An empty file maps to nothing
  // (data() is null, size() 0).
  MappedFile(const std::string& path, const std::string& who, Access access = Access::whole);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const char* data() const { return static_cast<const char*>(map_); }
  size_t size() const { return size_; }
  // Starts reading bytes [offset, offset + length) in, ahead of their use, in large reads (a hint:
  // the bytes are readable either way).
  void prefetch(size_t offset, size_t length) const;

 private:
  void* map_ = nullptr;
  size_t size_ = 0;
};

}  // namespace brigade
