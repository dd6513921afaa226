// `brigade bench comm`: point-to-point bandwidth and latency of each communication backend, for
// messages from 4 KiB to 256 MiB. CPU: local (threads) and gloo (two ranks over loopback TCP, in
// this process). GPU: the local hand-over, NCCL sending to itself, and a device-to-device copy —
// the ceiling any transfer on one GPU can reach. Prints "no GPU" for the GPU rows on a machine
// without one.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace brigade::bench_comm {

int bench_comm_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace brigade::bench_comm
