// Running `brigade train` in a test's own process, for the suites of the train tests.
#pragma once

#include <catch2/catch.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "train/command.h"

namespace test {

// Runs `brigade train args` in this process; returns what it printed. Requires success.
inline std::string train_ok(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int status = brigade::train::train_command(args, out, err);
  INFO(out.str() << err.str());
  REQUIRE(status == 0);
  return out.str();
}

// `args` with `more` after them.
inline std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

}  // namespace test
