// Settings of `brigade simulate` and the parser of its command line. Every flag lives in one table
// (options.cpp) that both parses and prints --help.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/schedule.h"
#include "tools/cli/flags.h"

namespace brigade::simulate_cli {

struct SimulateOptions {
  pipeline::ScheduleKind schedule = pipeline::ScheduleKind::one_f_one_b;
  int stages = 4;        // P: pipeline ranks
  int microbatches = 8;  // M
  int chunks = 0;        // V per rank; 0: the schedule's own (2 for interleaved and zb-v, else 1)
  double cost_f = 1;     // F, per chunk
  double cost_b = 1;     // the input-gradient half of a backward (I); B costs cost_b + cost_w
  double cost_w = 1;     // the weight-gradient half (W)
  double cost_comm = 0;  // message latency
  // Per global stage, when --cost-f/-b/-w is a comma-separated list (one value per stage, P*V of
  // them); empty: the single value above for every stage. A kind given as one number while another
  // is a list uses that number on every stage.
  std::vector<double> stage_f, stage_b, stage_w;
  int64_t activation_bytes = 0;
  std::string svg;    // write the timeline here
  int width = 200;    // most characters of time in the terminal chart
  bool grid = false;  // also print the rank x step action grid
  // A schedule file in PyTorch's CSV format (pipeline/schedule_csv.h) instead of --schedule: it
  // gives P, M and V too. write_schedule: write the simulated schedule to this file in that format.
  std::string schedule_file;
  std::string write_schedule;

  int chunks_or_default() const;
};

// A bad command line (tools/cli/flags.h): the message names the flag; the command prints it
// and the usage, and exits with status 2.
using UsageError = cli::UsageError;

using ParsedSimulateArgs = cli::Parsed<SimulateOptions>;

// Parses the arguments after `brigade simulate`. Accepts `--flag value` and `--flag=value`.
ParsedSimulateArgs parse_simulate_args(const std::vector<std::string>& args);

std::string simulate_usage();

}  // namespace brigade::simulate_cli
