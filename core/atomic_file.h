// Writing a file so that no reader ever sees half of it.
//
// The bytes go to a temporary file next to the target and are renamed over it once complete:
// rename() within one directory replaces the name in one step, so whoever opens the path — a
// resumed run reading a checkpoint, a viewer watching an SVG — gets the old file or the complete new
// one, never a torn write. The temporary is named "<path>.tmp.<pid>.<n>": in the same directory, so
// the rename stays on one file system (where it is atomic); pid and a per-process counter, so
// concurrent writers never share one. tools/train/checkpoint_dir.cpp relies on that form to pass over
// what a killed save left behind.
//
// Checkpoints (core/safetensors.h), Chrome traces, SVG timelines and benchmark JSON are all saved
// this way.
#pragma once

#include <cstddef>
#include <string>

namespace brigade {

// A file being written under its temporary name. commit() makes it appear at `path`; destroying it
// before then (an error on the way) removes the temporary and leaves `path` untouched. Errors throw
// brigade::Error starting with `who` ("save_safetensors: 'model.safetensors'", "save_timeline_svg").
class AtomicFile {
 public:
  AtomicFile(std::string path, std::string who);  // creates the temporary file
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();

  // Appends bytes, retrying partial writes.
  void write(const void* data, size_t bytes);
  void write(const std::string& text) { write(text.data(), text.size()); }

  // Flushes the bytes to disk (fsync) before the rename and the directory after it, so that after a
  // crash the name points at the old file or the complete new one — never at a file whose data was
  // still in the page cache.
  void commit();

  const std::string& temp_path() const { return temp_; }

 private:
  std::string path_, who_, temp_;
  int fd_ = -1;
  bool committed_ = false;
};

// All of `contents` written to `path` through an AtomicFile.
void write_file_atomically(const std::string& path, const std::string& contents, const std::string& who);

}  // namespace brigade
