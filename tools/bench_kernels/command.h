// `brigade bench kernels [--device cpu|cuda] [--json FILE] [--quick]`: measure the machine's ceilings
// (a GPU's, or the CPU's), then every kernel against them; print a table, optionally write the JSON
// that bench/results/ keeps.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace brigade::bench {

struct KernelsOptions {
  std::string device;     // "cpu", "cuda", or empty: cuda where a GPU is present, else cpu
  std::string json_path;  // empty: no JSON file
  bool quick = false;     // fewer sizes and repeats: a smoke run in well under a minute
  bool help = false;
};

// Parses the flags after `bench kernels`; on a bad flag returns nothing and says why in `error`.
std::optional<KernelsOptions> parse_kernels_options(const std::vector<std::string>& args, std::string& error);

// The command. Exit status: 0 on success — and for --device cuda on a machine without a GPU (or in
// the emulator build), where it says so and measures nothing, so scripts can run it anywhere; 2 for
// bad flags; 1 when a measurement fails.
int kernels_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace brigade::bench
