#include "launch/options.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>

namespace brigade::launch {

namespace {

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

using Flag = cli::Flag<LaunchOptions>;

Flag int_flag(std::string name, std::string value, std::string help, int LaunchOptions::*field, int low, int high) {
  return {name, std::move(value), std::move(help),
          [name, field, low, high](LaunchOptions& o, const std::string& v) { o.*field = parse_int(name, v, low, high); },
          [field](const LaunchOptions& o) { return std::to_string(o.*field); }};
}

// A number of seconds passed on to the ranks as an environment variable: kept as written.
Flag seconds_text_flag(std::string name, std::string help, std::string LaunchOptions::*field, std::string otherwise) {
  return {name, "SECONDS", std::move(help),
          [name, field](LaunchOptions& o, const std::string& v) {
            if (parse_seconds(name, v) <= 0) throw UsageError(name + ": must be positive");
            o.*field = v;
          },
          [otherwise](const LaunchOptions&) { return otherwise; }};
}

std::string seconds(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

const std::vector<Flag>& flags() {
  static const std::vector<Flag> table = {
      {"-n", "N", "number of processes (ranks) on this machine",
       [](LaunchOptions& o, const std::string& v) { o.nprocs = parse_int("-n", v, 1, 4096); },
       [](const LaunchOptions&) { return std::string("required"); }},
      {"--nprocs", "N", "the same as -n",
       [](LaunchOptions& o, const std::string& v) { o.nprocs = parse_int("--nprocs", v, 1, 4096); },
       [](const LaunchOptions&) { return std::string("required"); }},
      int_flag("--nnodes", "M", "machines in the job, each running this launcher", &LaunchOptions::nnodes, 1, 1 << 20),
      int_flag("--node-rank", "K", "this machine's place, 0 .. M-1", &LaunchOptions::node_rank, 0, 1 << 20),
      cli::text_flag("--master-addr", "HOST", "node 0's address (needed when M > 1)",
                     &LaunchOptions::master_addr, "none"),
      {"--master-port", "PORT", "the port node 0's launcher listens on (needed when M > 1)",
       [](LaunchOptions& o, const std::string& v) { o.master_port = parse_int("--master-port", v, 1, 65535); },
       [](const LaunchOptions&) { return std::string("none"); }},
      int_flag("--max-restarts", "R", "after a failure, restart the whole job up to R times; a program that "
               "checkpoints (brigade train --save DIR/) resumes from there", &LaunchOptions::max_restarts, 0, 1 << 20),
      {"--node-timeout", "SECONDS", "a node whose launcher is silent this long counts as lost, and the job stops",
       [](LaunchOptions& o, const std::string& v) {
         o.node_timeout_seconds = parse_seconds("--node-timeout", v);
         // Heartbeats come every second: a limit under two of them would lose healthy links.
         if (o.node_timeout_seconds < 2) throw UsageError("--node-timeout: must be at least 2 seconds");
       },
       [](const LaunchOptions& o) { return seconds(o.node_timeout_seconds); }},
      {"--store", "KIND", "file or tcp: how the ranks meet",
       [](LaunchOptions& o, const std::string& v) {
         if (v != "file" && v != "tcp") throw UsageError("--store: expected file or tcp, got '" + v + "'");
         o.store = v;
       },
       [](const LaunchOptions&) { return std::string("file on one machine, tcp on several"); }},
      {"--grace", "SECONDS", "time between SIGTERM and SIGKILL",
       [](LaunchOptions& o, const std::string& v) { o.grace_seconds = parse_seconds("--grace", v); },
       [](const LaunchOptions& o) { return seconds(o.grace_seconds); }},
      seconds_text_flag("--timeout", "sets BRIGADE_COMM_TIMEOUT for the ranks: how long a communication call may "
                        "wait before it fails", &LaunchOptions::timeout, "the library's, 300 s"),
      seconds_text_flag("--connect-timeout", "sets BRIGADE_CONNECT_TIMEOUT: how long a rank waits for the others "
                        "to start and connect", &LaunchOptions::connect_timeout,
                        "the library's: the call timeout, at least 60 s"),
  };
  return table;
}

}  // namespace

std::string launch_usage() {
  return "usage: brigade launch -n N [flags] [--] program [args...]\n"
         "\n"
         "Starts N copies of a program on this machine, one per rank, and waits for them. The first word\n"
         "that is not a flag (or everything after --) is the program and its arguments, passed on as they are.\n"
         "Each gets RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE, and a rendezvous: a fresh\n"
         "directory in BRIGADE_COMM_STORE (--store file, the default on one machine), or MASTER_ADDR and\n"
         "a free MASTER_PORT for rank 0's TCP store (--store tcp). Every output line is prefixed with its\n"
         "rank: \"[rank 2] ...\". When a rank fails, the others get SIGTERM, then SIGKILL after the grace\n"
         "period, and the launcher exits with the failing rank's status (128 + N for signal N).\n"
         "\n"
         "Several machines: run the same command on each, with --nnodes M and --node-rank 0 .. M-1, and\n"
         "--master-addr/--master-port naming where node 0's launcher listens (an address every node\n"
         "reaches). Ranks are numbered node by node. A failure anywhere stops the ranks of every node, and\n"
         "every launcher exits non-zero. Under Slurm: srun --ntasks-per-node=1 brigade launch --nnodes\n"
         "$SLURM_NNODES --node-rank $SLURM_NODEID --master-addr <first host> ... (or srun the program).\n"
         "\n"
         "flags:\n" +
         cli::flag_lines(flags());
}

LaunchOptions parse_launch_args(const std::vector<std::string>& args, bool* help) {
  LaunchOptions o;
  *help = false;
  cli::parse_flags(args, flags(), o, *help, &o.command, cli::Operands::end_of_flags);
  if (*help) return o;
  // A word that looks like a flag but is none of launch's (after "--" it would be the program's).
  if (!o.command.empty() && o.command[0].size() > 1 && o.command[0][0] == '-' &&
      std::find(args.begin(), args.end(), "--") == args.end())
    throw UsageError("unknown flag '" + o.command[0] + "'");
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
