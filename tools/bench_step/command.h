// `brigade bench step`: the time of one training step — forward, backward and an AdamW update — of a
// GPT on one device, as a number to compare with another framework running the same model
// (bench/compare_pytorch.py does that with PyTorch). Also tokens/s and the peak memory tensors held.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace brigade::bench_step {

// Parses the flags, runs the steps, prints the report (and writes --json); returns the exit status
// (0 done, 1 an error while running, 2 a bad command line).
int bench_step_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace brigade::bench_step
