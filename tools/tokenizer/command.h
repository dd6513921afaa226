// `brigade tokenizer` as a function: parse the arguments, train / encode / decode, print the result;
// returns the exit status (0 done, 1 runtime error such as an unreadable file, 2 bad command line).
// The CLI's main and tests/test_text.cpp both call it.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace brigade::tokenizer_cli {

int tokenizer_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace brigade::tokenizer_cli
