// `brigade launch` flags.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace brigade::launch {

struct LaunchOptions {
  int nprocs = 0;                    // -n: processes to start on this machine
  std::string store = "file";        // --store file|tcp: how the ranks meet (comm/store.h)
  double grace_seconds = 5;          // --grace: SIGTERM to SIGKILL, once a rank failed
  std::string timeout;               // --timeout: BRIGADE_COMM_TIMEOUT for the ranks (seconds), or empty
  std::string connect_timeout;       // --connect-timeout: BRIGADE_CONNECT_TIMEOUT (seconds), or empty
  std::vector<std::string> command;  // the program and its arguments
};

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws UsageError naming the flag. `help` is set (and nothing else checked) for -h/--help.
LaunchOptions parse_launch_args(const std::vector<std::string>& args, bool* help);
std::string launch_usage();

}  // namespace brigade::launch
