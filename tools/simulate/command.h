// `brigade simulate` as a function: parse the flags, build the schedule, dry-run it, print the
// report (and write the SVG); returns the exit status (0 done, 1 the schedule failed or a file could
// not be written, 2 bad command line). The CLI's main and the tests both call it.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace brigade::simulate_cli {

int simulate_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace brigade::simulate_cli
