// Running a job's ranks: this machine's share of them, and — across machines — agreeing with the
// other machines' launchers when to start, stop and restart.
//
// One machine: start -n ranks (rank_group.h), wait; the first failure stops the rest. Several: node
// 0's launcher coordinates (node_link.h) — it says when every node starts its ranks and where rank
// 0's store is; a failure on any node, or a node whose launcher goes silent, stops the ranks of
// every node, and every launcher exits non-zero. With --max-restarts R, node 0 restarts the whole job
// after a failure of a rank (not after an interrupt or a lost node), up to R times, each run in a
// fresh rendezvous; the ranks see BRIGADE_RESTART_COUNT.
#pragma once

#include "launch/options.h"

namespace brigade::launch {

// Runs the job to the end; returns 0 when every rank exited 0 (on its last run), else the first
// failing rank's exit status (128 + N when it was killed by signal N; 1 for a lost node). Ranks'
// output goes to this process's stdout and stderr, line by line, prefixed "[rank R] " with the rank
// in the whole job. Throws std::runtime_error if the job cannot start.
int run_job(const LaunchOptions& options);

}  // namespace brigade::launch
