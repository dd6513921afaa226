// `brigade launch` as a function: parse the flags, run the ranks; returns the exit status (the
// failing rank's status, 2 for a bad command line).
#pragma once

#include <string>
#include <vector>

namespace brigade::launch {

int launch_command(const std::vector<std::string>& args);

}  // namespace brigade::launch
