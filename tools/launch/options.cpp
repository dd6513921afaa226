#include "launch/options.h"

#include <charconv>
#include <cmath>

namespace brigade::launch {

namespace {

std::string take_value(const std::vector<std::string>& args, size_t& i) {
  if (i + 1 >= args.size()) throw UsageError(args[i] + ": missing value");
  return args[++i];
}

double parse_seconds(const std::string& flag, const std::string& text) {
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v) || v < 0)
    throw UsageError(flag + ": expected a non-negative number of seconds, got '" + text + "'");
  return v;
}

int parse_int(const std::string& flag, const std::string& text, int low, int high) {
  int v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < low || v > high)
    throw UsageError(flag + ": expected an integer from " + std::to_string(low) + " to " + std::to_string(high) +
                     ", got '" + text + "'");
  return v;
}

}  // namespace

std::string launch_usage() {
  return "usage: brigade launch -n N [--nnodes M --node-rank K --master-addr HOST --master-port PORT]\n"
         "                      [--max-restarts R] [--store file|tcp] [--grace SECONDS] [--timeout SECONDS]\n"
         "                      [--connect-timeout SECONDS] [--node-timeout SECONDS] [--] program [args...]\n"
         "\n"
         "Starts N copies of a program on this machine, one per rank, and waits for them.\n"
         "Each gets RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE, and a rendezvous: a fresh\n"
         "directory in BRIGADE_COMM_STORE (--store file, the default on one machine), or MASTER_ADDR and\n"
         "a free MASTER_PORT for rank 0's TCP store (--store tcp). Every output line is prefixed with its\n"
         "rank: \"[rank 2] ...\". When a rank fails, the others get SIGTERM, then SIGKILL after the grace\n"
         "period (default 5 s), and the launcher exits with the failing rank's status (128 + N for signal N).\n"
         "\n"
         "Several machines: run the same command on each, with --nnodes M and --node-rank 0 .. M-1, and\n"
         "--master-addr/--master-port naming where node 0's launcher listens (an address every node\n"
         "reaches). Ranks are numbered node by node. A failure anywhere stops the ranks of every node, and\n"
         "every launcher exits non-zero. Under Slurm: srun --ntasks-per-node=1 brigade launch --nnodes\n"
         "$SLURM_NNODES --node-rank $SLURM_NODEID --master-addr <first host> ... (or srun the program).\n"
         "\n"
         "  -n, --nprocs N     number of processes (ranks) on this machine\n"
         "  --nnodes M         machines in the job, each running this launcher (default 1)\n"
         "  --node-rank K      this machine's place, 0 .. M-1 (default 0)\n"
         "  --master-addr HOST node 0's address (needed when M > 1)\n"
         "  --master-port PORT the port node 0's launcher listens on (needed when M > 1)\n"
         "  --max-restarts R   after a failure, restart the whole job up to R times (default 0); a\n"
         "                     program that checkpoints (brigade train --save DIR/) resumes from there\n"
         "  --node-timeout SECONDS\n"
         "                     a node whose launcher is silent this long counts as lost, and the job\n"
         "                     stops (default 30)\n"
         "  --store KIND       file or tcp (default: file on one machine, tcp on several)\n"
         "  --grace SECONDS    time between SIGTERM and SIGKILL (default 5)\n"
         "  --timeout SECONDS  sets BRIGADE_COMM_TIMEOUT for the ranks: how long a communication call\n"
         "                     may wait before it fails (default: the library's, 300 s)\n"
         "  --connect-timeout SECONDS\n"
         "                     sets BRIGADE_CONNECT_TIMEOUT: how long a rank waits for the others to\n"
         "                     start and connect (default: the call timeout, at least 60 s)\n";
}

LaunchOptions parse_launch_args(const std::vector<std::string>& args, bool* help) {
  LaunchOptions o;
  *help = false;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") {
      *help = true;
      return o;
    }
    if (a == "--") {
      ++i;
      break;
    }
    if (a.empty() || a[0] != '-') break;  // the program starts here
    if (a == "-n" || a == "--nprocs") {
      std::string v = take_value(args, i);
      o.nprocs = parse_int(a, v, 1, 4096);
    } else if (a == "--nnodes" || a == "--node-rank" || a == "--master-port" || a == "--max-restarts") {
      const int low = a == "--nnodes" || a == "--master-port" ? 1 : 0;
      const int high = a == "--master-port" ? 65535 : 1 << 20;
      int& target = a == "--nnodes" ? o.nnodes : a == "--node-rank" ? o.node_rank : a == "--master-port"
                                                                                      ? o.master_port
                                                                                      : o.max_restarts;
      target = parse_int(a, take_value(args, i), low, high);
    } else if (a == "--master-addr") {
      o.master_addr = take_value(args, i);
    } else if (a == "--node-timeout") {
      o.node_timeout_seconds = parse_seconds(a, take_value(args, i));
      // Heartbeats come every second: a limit under two of them would lose healthy links.
      if (o.node_timeout_seconds < 2) throw UsageError("--node-timeout: must be at least 2 seconds");
    } else if (a == "--store") {
      o.store = take_value(args, i);
      if (o.store != "file" && o.store != "tcp")
        throw UsageError("--store: expected file or tcp, got '" + o.store + "'");
    } else if (a == "--grace") {
      o.grace_seconds = parse_seconds(a, take_value(args, i));
    } else if (a == "--timeout") {
      o.timeout = take_value(args, i);
      if (parse_seconds(a, o.timeout) <= 0) throw UsageError("--timeout: must be positive");
    } else if (a == "--connect-timeout") {
      o.connect_timeout = take_value(args, i);
      if (parse_seconds(a, o.connect_timeout) <= 0) throw UsageError("--connect-timeout: must be positive");
    } else {
      throw UsageError("unknown flag '" + a + "'");
    }
  }
  o.command.assign(args.begin() + long(i), args.end());
  if (o.nprocs == 0) throw UsageError("-n: the number of processes is required");
  if (o.command.empty()) throw UsageError("no program to run");
  if (o.node_rank >= o.nnodes)
    throw UsageError("--node-rank " + std::to_string(o.node_rank) + " is not below --nnodes " +
                     std::to_string(o.nnodes));
  if (o.nnodes > 1 && (o.master_addr.empty() || o.master_port == 0))
    throw UsageError("--nnodes " + std::to_string(o.nnodes) +
                     ": --master-addr and --master-port are needed, naming where node 0's launcher listens");
  if (o.nnodes > 1 && o.store == "file")
    throw UsageError("--store file: several machines meet through node 0's TCP store (--store tcp, the default "
                     "with --nnodes > 1)");
  if (o.store.empty()) o.store = o.nnodes > 1 ? "tcp" : "file";
  return o;
}

}  // namespace brigade::launch
