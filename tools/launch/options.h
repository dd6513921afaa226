// `brigade launch` flags.
#pragma once

#include <string>
#include <vector>

#include "tools/cli/flags.h"

namespace brigade::launch {

struct LaunchOptions {
  int nprocs = 0;                    // -n: processes to start on this machine
  // Several machines (torchrun's flags): this launcher runs ranks node_rank * nprocs ... + nprocs - 1
  // of nnodes * nprocs; node 0's launcher listens on master_addr:master_port for the others.
  int nnodes = 1;                    // --nnodes
  int node_rank = 0;                 // --node-rank
  std::string master_addr;           // --master-addr: node 0's address, reachable from every node
  int master_port = 0;               // --master-port: where node 0's launcher listens
  int max_restarts = 0;              // --max-restarts: restart the whole job up to this many times
  double node_timeout_seconds = 30;  // --node-timeout: a silent launcher link counts as lost after this
  // --store file|tcp: how the ranks meet (comm/store.h). Empty: file on one machine, tcp on several.
  std::string store;
  double grace_seconds = 5;          // --grace: SIGTERM to SIGKILL, once a rank failed
  std::string timeout;               // --timeout: BRIGADE_COMM_TIMEOUT for the ranks (seconds), or empty
  std::string connect_timeout;       // --connect-timeout: BRIGADE_CONNECT_TIMEOUT (seconds), or empty
  std::vector<std::string> command;  // the program and its arguments
};

using UsageError = cli::UsageError;

// Parses the flags (tools/cli/flags.h); the first word that is not one of them, or everything after
// "--", is the program. Throws UsageError naming the flag. `help` is set (and nothing else checked)
// for -h/--help.
LaunchOptions parse_launch_args(const std::vector<std::string>& args, bool* help);
std::string launch_usage();

}  // namespace brigade::launch
