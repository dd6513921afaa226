// `brigade generate`: text from a trained GPT. tools/brigade.cpp dispatches here.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace brigade::generate_cli {

// Runs `brigade generate <args>`; returns the exit status (2: bad command line, 1: an error).
int generate_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace brigade::generate_cli
