// Writing a whole file so that a reader never sees half of it (internal to pipeline/; not installed).
//
// The text goes to a temporary file next to `path` — same directory, so the same file system — and
// is then renamed over `path`: rename() replaces the name in one step, so a reader opens either the
// old file or the complete new one. The SVG charts and the Chrome traces are written this way, often
// over a file a viewer is watching.
#pragma once

#include <string>

namespace brigade::pipeline {

// Throws an Error that starts with `who` (the public function doing the save, e.g.
// "save_timeline_svg") and names the file it could not create, write or rename. Leaves no temporary
// file behind, whether it succeeds or fails.
void write_file_atomically(const std::string& path, const std::string& contents, const char* who);

}  // namespace brigade::pipeline
