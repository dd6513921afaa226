#include "launch/command.h"

#include <iostream>

#include "launch/launcher.h"
#include "launch/options.h"

namespace brigade::launch {

int launch_command(const std::vector<std::string>& args) {
  LaunchOptions options;
  try {
    bool help = false;
    options = parse_launch_args(args, &help);
    if (help) {
      std::cout << launch_usage();
      return 0;
    }
  } catch (const UsageError& e) {
    std::cerr << "brigade launch: " << e.what() << "\n\n" << launch_usage();
    return 2;
  }
  try {
    std::cout.flush();
    return run_job(options);
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
}

}  // namespace brigade::launch
