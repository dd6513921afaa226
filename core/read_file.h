// Reading a whole file into memory: the counterpart of write_file_atomically (core/atomic_file.h),
// for the small text files brigade reads — tokenizer vocabularies and merges, training corpora.
#pragma once

#include <string>

namespace brigade {

// The bytes of the file at `path`. Throws brigade::Error starting with `who` ("load_tokenizer"),
// naming the path and the system's reason ("No such file or directory", "Is a directory").
std::string read_file(const std::string& path, const std::string& who);

}  // namespace brigade
