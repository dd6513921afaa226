// `brigade plan` as a function: parse the flags, search the configurations (pipeline/analysis/
// planner.h), print the best with the command line that runs each; returns the exit status (0 done,
// 1 nothing fits the memory, 2 bad command line). The CLI's main and the tests both call it.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace brigade::plan_cli {

int plan_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace brigade::plan_cli
