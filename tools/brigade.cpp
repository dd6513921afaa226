// The `brigade` command: one binary, one subcommand per job.
//
//   brigade train ...     train a GPT: to sort digits, or on text with --data (tools/train/)
//   brigade simulate ...  dry-run a pipeline schedule: bubble, memory, timeline (tools/simulate/)
//   brigade plan ...      find the fastest pipeline x data-parallel configuration that fits (tools/plan/)
//   brigade bench ...     benchmarks: kernels against the machine's ceilings (bench_kernels/), communication (bench_comm/),
//                         pipeline schedules run for real (bench_pipeline/), a training step (bench_step/)
//   brigade launch ...    start N ranks of a program on this machine or several (tools/launch/)
//   brigade tokenizer ... train, or encode and decode with, a byte-level BPE tokenizer (tools/tokenizer/)
//   brigade data ...      prepare token shards from text files (tools/data_prepare/)
//   brigade generate ...  continue a prompt with a trained GPT (tools/generate/)
//   brigade export ...    write a trained GPT in Hugging Face's layout (tools/export/)
//   brigade curves ...    redraw a run's loss curves from its --metrics file (tools/curves/)
#include <iostream>
#include <string>
#include <vector>

#include "bench_kernels/command.h"
#include "bench_comm/bench_comm.h"
#include "bench_pipeline/command.h"
#include "bench_step/command.h"
#include "curves/command.h"
#include "data_prepare/command.h"
#include "export/command.h"
#include "generate/command.h"
#include "launch/command.h"
#include "plan/command.h"
#include "simulate/command.h"
#include "tokenizer/command.h"
#include "train/command.h"

namespace {

struct Subcommand {
  const char* name;
  const char* summary;
  int (*run)(const std::vector<std::string>& args);
};

int run_train(const std::vector<std::string>& args) { return brigade::train::train_command(args, std::cout, std::cerr); }
int run_data(const std::vector<std::string>& args) {
  return brigade::data_cli::data_command(args, std::cout, std::cerr);
}
int run_generate(const std::vector<std::string>& args) {
  return brigade::generate_cli::generate_command(args, std::cout, std::cerr);
}
int run_export(const std::vector<std::string>& args) {
  return brigade::export_cli::export_command(args, std::cout, std::cerr);
}
int run_curves(const std::vector<std::string>& args) {
  return brigade::curves_cli::curves_command(args, std::cout, std::cerr);
}
int run_tokenizer(const std::vector<std::string>& args) {
  return brigade::tokenizer_cli::tokenizer_command(args, std::cout, std::cerr);
}
int run_launch(const std::vector<std::string>& args) { return brigade::launch::launch_command(args); }
int run_simulate(const std::vector<std::string>& args) {
  return brigade::simulate_cli::simulate_command(args, std::cout, std::cerr);
}
int run_plan(const std::vector<std::string>& args) { return brigade::plan_cli::plan_command(args, std::cout, std::cerr); }

// `brigade bench <what>`: one benchmark family per word.
int run_bench(const std::vector<std::string>& args) {
  const char* usage =
      "usage: brigade bench <benchmark> [flags]\n\n"
      "benchmarks:\n"
      "  kernels   every kernel against the machine's measured ceilings: a GPU's copy bandwidth and\n"
      "            cuBLAS/cuDNN, or the CPU's copy bandwidth and FMA peak (--json FILE, --quick)\n"
      "  comm      point-to-point bandwidth and latency per communication backend (--quick)\n"
      "  pipeline  every pipeline schedule run on a GPT: bubble vs the simulator, speed-up, exposed comm\n"
      "            (--json FILE, --trace-dir DIR, --quick; --help for the rest)\n"
      "  step      one device's GPT training step: median time, tokens/s, peak memory (--help)\n";
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    (args.empty() ? std::cerr : std::cout) << usage;
    return args.empty() ? 2 : 0;
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "kernels") return brigade::bench::kernels_command(rest, std::cout, std::cerr);
  if (args[0] == "comm") return brigade::bench_comm::bench_comm_command(rest, std::cout, std::cerr);
  if (args[0] == "pipeline") return brigade::bench_pipeline::bench_pipeline_command(rest, std::cout, std::cerr);
  if (args[0] == "step") return brigade::bench_step::bench_step_command(rest, std::cout, std::cerr);
  std::cerr << "brigade bench: unknown benchmark '" << args[0] << "'\n\n" << usage;
  return 2;
}

const Subcommand kSubcommands[] = {
    {"train", "train a GPT, pipelined or on one device: to sort digits (held-out accuracy), or on token shards (--data)",
     run_train},
    {"simulate", "dry-run a pipeline-parallel schedule: its bubble, memory and timeline", run_simulate},
    {"plan", "the fastest pipeline x data-parallel configuration of a GPT that fits N devices, and how to run it",
     run_plan},
    {"bench", "benchmarks: 'bench kernels' against measured ceilings, 'bench comm' per transport, 'bench pipeline' every schedule, 'bench step' a training step",
     run_bench},
    {"launch", "start a program's ranks on this machine (or several: --nnodes), with a rendezvous", run_launch},
    {"tokenizer", "GPT-2's byte-level BPE: 'tokenizer train' on text files, 'encode' and 'decode' with it", run_tokenizer},
    {"data", "'data prepare': text files to llm.c token shards for `train --data`", run_data},
    {"generate", "continue a prompt with a trained GPT (a --data checkpoint, or Hugging Face GPT-2 weights)",
     run_generate},
    {"export", "write a trained GPT as a Hugging Face GPT-2 directory, one file or shards with an index", run_export},
    {"curves", "redraw a run's loss curves (SVG) from its `train --metrics` file", run_curves},
};

void print_usage(std::ostream& os) {
  os << "usage: brigade <command> [flags]\n\n"
        "brigade is a from-scratch deep-learning framework; this tool drives it.\n\ncommands:\n";
  for (const Subcommand& c : kSubcommands) {
    os << "  " << c.name << std::string(11 - std::string(c.name).size(), ' ') << c.summary << "\n";
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
    return c.run(std::vector<std::string>(args.begin() + 1, args.end()));
  }
  std::cerr << "brigade: unknown command '" << command << "'\n\n";
  print_usage(std::cerr);
  return 2;
}
