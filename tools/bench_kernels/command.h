// `brigade bench kernels [--device cpu|cuda] [--json FILE] [--quick]`: measure the machine's ceilings
// (a GPU's, or the CPU's), then every kernel against them; print a table, optionally write the JSON
// that bench/results/ keeps.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "tools/cli/device_choice.h"

namespace brigade::bench {

struct KernelsOptions {
  cli::DeviceChoice device;  // auto: cuda where this build can measure a GPU and one is present, else cpu
  std::string json_path;     // empty: no JSON file
  bool quick = false;        // fewer sizes and repeats: a smoke run in well under a minute
};

using ParsedKernelsArgs = cli::Parsed<KernelsOptions>;

// Parses the flags after `bench kernels` (tools/cli/flags.h); throws cli::UsageError naming the flag.
ParsedKernelsArgs parse_kernels_args(const std::vector<std::string>& args);

// The command. Exit status: 0 on success — and for --device cuda on a machine without a GPU (or in
// the emulator build), where it says so and measures nothing, so scripts can run it anywhere; 2 for
// bad flags; 1 when a measurement fails.
int kernels_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace brigade::bench
