// The frame every `brigade <command>` runs in, so that all of them treat a command line alike:
//
//   a bad command line  ->  "<name>: <what is wrong>", a blank line and the usage, on err; status 2
//   --help / -h         ->  the usage on out; status 0
//   an error while running (brigade::Error, a filesystem error, bad_alloc)
//                       ->  "<name>: error: <what>" on err; status 1
//   otherwise           ->  whatever the command returns (0 for success)
#pragma once

#include <exception>
#include <ostream>
#include <string>
#include <type_traits>

#include "tools/cli/flags.h"

namespace brigade::cli {

// `parse()` returns a struct with `options` and `help` (ParsedTrainArgs, ...) or throws UsageError;
// `usage()` returns the usage text; `run(options)` does the work and returns the exit status, or
// returns nothing when it can only succeed or throw (the status is then 0).
template <class Parse, class Usage, class Run>
int run_command(const std::string& name, std::ostream& out, std::ostream& err, Parse parse, Usage usage, Run run) {
  decltype(parse()) parsed;
  try {
    parsed = parse();
  } catch (const UsageError& e) {
    err << name << ": " << e.what() << "\n\n" << usage();
    return 2;
  }
  if (parsed.help) {
    out << usage();
    return 0;
  }
  try {
    if constexpr (std::is_void_v<decltype(run(parsed.options))>) {
      run(parsed.options);
      return 0;
    } else {
      return run(parsed.options);
    }
  } catch (const std::exception& e) {
    err << name << ": error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace brigade::cli
