// `brigade train` as a function: parse the flags, train, print the report; returns the exit status
// (0 done, 1 runtime error, 2 bad command line). The CLI's main and the tests both call it.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace brigade::train {

int train_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace brigade::train
