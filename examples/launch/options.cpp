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

}  // namespace

std::string launch_usage() {
  return "usage: brigade launch -n N [--store file|tcp] [--grace SECONDS] [--timeout SECONDS]\n"
         "                      [--connect-timeout SECONDS] [--] program [args...]\n"
         "\n"
         "Starts N copies of a program on this machine, one per rank, and waits for them.\n"
         "Each gets RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE, and a rendezvous: a fresh\n"
         "directory in BRIGADE_COMM_STORE (--store file, the default), or MASTER_ADDR=127.0.0.1 and a\n"
         "free MASTER_PORT (--store tcp). Every output line is prefixed with its rank: \"[rank 2] ...\".\n"
         "When a rank fails, the others get SIGTERM, then SIGKILL after the grace period (default 5 s),\n"
         "and the launcher exits with the failing rank's status (128 + N for signal N).\n"
         "\n"
         "  -n, --nprocs N     number of processes (ranks)\n"
         "  --store KIND       file or tcp (default file)\n"
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
      int n = 0;
      auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
      if (ec != std::errc() || end != v.data() + v.size() || n < 1 || n > 4096)
        throw UsageError(a + ": expected a number of processes from 1 to 4096, got '" + v + "'");
      o.nprocs = n;
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
  return o;
}

}  // namespace brigade::launch
