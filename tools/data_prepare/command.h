// `brigade data`: preparing training data. tools/brigade.cpp dispatches here.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace brigade::data_cli {

// Runs `brigade data <args>`; returns the exit status (2 for a bad command line, 1 for an error).
int data_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace brigade::data_cli
