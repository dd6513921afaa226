// Running N ranks of a program on this machine and supervising them.
//
// A job is only as alive as its least alive rank: if one fails, the others will sooner or later
// wait for it forever (or until their communication timeout). So the launcher treats the ranks as
// one unit — the first rank to fail stops the rest (SIGTERM, then SIGKILL after a grace period), and
// its status becomes the launcher's. Ctrl-C or a SIGTERM to the launcher stops them the same way.
#pragma once

#include "launch/options.h"

namespace brigade::launch {

// Runs the job to the end; returns 0 when every rank exited 0, else the first failing rank's exit
// status (128 + N when it was killed by signal N). Ranks' output goes to this process's stdout and
// stderr, line by line, prefixed "[rank R] ". Throws std::runtime_error if the job cannot start.
int run_ranks(const LaunchOptions& options);

}  // namespace brigade::launch
