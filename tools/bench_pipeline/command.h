// `brigade bench pipeline` as a function: parse the flags, run every schedule, print the tables and
// write the JSON and trace files asked for; returns the exit status (0 done, 1 a run failed or a
// file could not be written, 2 bad command line). The CLI's main and the tests both call it.
//
// What it measures, and how each number is defined: benchmark.h, analysis.h, and the definitions
// printed under the tables (report.cpp).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace brigade::bench_pipeline {

int bench_pipeline_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace brigade::bench_pipeline
