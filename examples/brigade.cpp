// The `brigade` command: one binary, one subcommand per job.
//
//   brigade train ...     train the default GPT on a generated task (examples/train/)
//   brigade simulate ...  (coming) pipeline schedules, simulated
//   brigade bench ...     (coming) kernel and step benchmarks
//   brigade launch ...    (coming) multi-process pipeline-parallel training
#include <iostream>
#include <string>
#include <vector>

#include "train/command.h"

namespace {

struct Subcommand {
  const char* name;
  const char* summary;
  int (*run)(const std::vector<std::string>& args);  // null: not implemented yet
};

int run_train(const std::vector<std::string>& args) { return brigade::train::train_command(args, std::cout, std::cerr); }

const Subcommand kSubcommands[] = {
    {"train", "train a small GPT to sort digits and report its held-out accuracy", run_train},
    {"simulate", "(coming) simulate pipeline-parallel schedules", nullptr},
    {"bench", "(coming) benchmark kernels and training steps", nullptr},
    {"launch", "(coming) run pipeline-parallel training over several processes", nullptr},
};

void print_usage(std::ostream& os) {
  os << "usage: brigade <command> [flags]\n\n"
        "brigade is a from-scratch deep-learning framework; this tool drives it.\n\ncommands:\n";
  for (const Subcommand& c : kSubcommands) {
    os << "  " << c.name << std::string(10 - std::string(c.name).size(), ' ') << c.summary << "\n";
  }
  os << "\nRun 'brigade <command> --help' for a command's flags. brigade " << BRIGADE_VERSION << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    print_usage(std::cerr);
    return 2;
  }
  const std::string command = args[0];
  if (command == "--help" || command == "-h" || command == "help") {
    print_usage(std::cout);
    return 0;
  }
  if (command == "--version") {
    std::cout << "brigade " << BRIGADE_VERSION << "\n";
    return 0;
  }
  for (const Subcommand& c : kSubcommands) {
    if (command != c.name) continue;
    if (!c.run) {
      std::cerr << "brigade " << command << ": not implemented yet (coming in a later release)\n";
      return 2;
    }
    return c.run(std::vector<std::string>(args.begin() + 1, args.end()));
  }
  std::cerr << "brigade: unknown command '" << command << "'\n\n";
  print_usage(std::cerr);
  return 2;
}
