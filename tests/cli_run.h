// Running a `brigade` command in a test's own process, as the CLI runs it (tools/cli/command.h), for
// the tests that check what a command prints and the status it exits with.
#pragma once

#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace test {

// Runs `command(args, out, err)` (simulate_cli::simulate_command, ...): returns its exit status and
// what it printed on out; what it printed on err goes to *err_text when one is given.
template <class Command>
std::pair<int, std::string> run_cli(Command command, const std::vector<std::string>& args,
                                    std::string* err_text = nullptr) {
  std::ostringstream out, err;
  const int status = command(args, out, err);
  if (err_text) *err_text = err.str();
  return {status, out.str()};
}

}  // namespace test
