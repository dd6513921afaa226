// Running `brigade train` in a test's own process, for the suites of the train tests.
#pragma once

#include <catch2/catch.hpp>

#include <filesystem>
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

// A scratch directory for a run's files, /tmp/brigade_test_<name>: emptied when made and removed
// (with everything in it) afterwards. `path` is a string with no trailing '/', as the flags take it
// and as the messages the tests look for print it.
struct NamedTempDir {
  std::string path;
  explicit NamedTempDir(const std::string& name)
      : path((std::filesystem::temp_directory_path() / ("brigade_test_" + name)).string()) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directory(path);
  }
  ~NamedTempDir() { std::filesystem::remove_all(path); }
  NamedTempDir(const NamedTempDir&) = delete;
  NamedTempDir& operator=(const NamedTempDir&) = delete;
  std::string file(const std::string& name) const { return path + "/" + name; }
};

// `args` with `more` after them.
inline std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

}  // namespace test
