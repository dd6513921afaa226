#include "bench_comm/bench_comm.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <future>
#include <iostream>

#include "brigade.h"
#include "comm/comm.h"
#include "core/format.h"
#include "core/stream.h"
#include "kernels/ops.h"
#include "tools/cli/command.h"

namespace brigade::bench_comm {

namespace {

using Clock = std::chrono::steady_clock;
using comm::Communicator;
using comm::P2P;

struct Settings {
  int64_t max_bytes = int64_t(256) << 20;
  double seconds_per_row = 0.2;  // repeats are chosen to take about this long
};

// A latency row has no meaningful bandwidth: `with_bandwidth` leaves that column empty.
void print_row(std::ostream& out, const std::string& backend, const std::string& what, int64_t bytes,
               double seconds_per_message, bool with_bandwidth = true) {
  char line[160];
  // Sizes are 4 KiB times powers of 4: whole units, so no decimals.
  std::snprintf(line, sizeof line, "%-8s %-22s %9s %12.1f us", backend.c_str(), what.c_str(),
                format_bytes(double(bytes), 0).c_str(), seconds_per_message * 1e6);
  out << line;
  if (with_bandwidth) {
    std::snprintf(line, sizeof line, " %10.2f GB/s", double(bytes) / seconds_per_message / 1e9);
    out << line;
  }
  out << "\n";
}

// Runs `body(rank)` on the two ranks of `comms` at once, each on a thread of its own
// (comm/local_ranks.h), and returns the wall time of the slower one; rethrows a rank's failure.
// Both ranks stay on their device's default stream, where the tensors they send were made.
double on_two_threads(std::vector<std::unique_ptr<Communicator>>& comms, const std::function<void(int)>& body) {
  comm::RankThreadOptions options;
  options.own_streams = false;
  auto start = Clock::now();
  comm::run_local_ranks(comms, [&](Communicator& c) { body(c.rank()); }, options);
  return std::chrono::duration<double>(Clock::now() - start).count();
}

int repeats_for(int64_t bytes, const Settings& s) {
  // Assume ~2 GB/s to size the run; clamp so small messages still average over many.
  double guess = double(bytes) / 2e9 + 20e-6;
  return int(std::clamp(s.seconds_per_row / guess, 3.0, 2000.0));
}

// Rank 0 sends `repeats` messages of `bytes` to rank 1, which receives them into one buffer: the
// time per message at steady state (one warm-up message first, untimed).
void bandwidth_rows(std::ostream& out, const std::string& backend, std::vector<std::unique_ptr<Communicator>>& comms,
                    Device device, const Settings& s, const std::function<void()>& sync = [] {}) {
  int tag = 100;  // a channel per size: channels are fixed-shape
  for (int64_t bytes = 4096; bytes <= s.max_bytes; bytes *= 4, ++tag) {
    int64_t n = bytes / 4;
    Tensor x = ones({n}, DType::f32, device), y = zeros({n}, DType::f32, device);
    int repeats = repeats_for(bytes, s);
    auto transfer = [&](int rank, int count) {
      for (int i = 0; i < count; ++i) {
        if (rank == 0) comms[0]->send(x, 1, tag);
        else comms[1]->recv_into(y, 0, tag);
      }
      sync();
    };
    on_two_threads(comms, [&](int rank) { transfer(rank, 1); });
    double seconds = on_two_threads(comms, [&](int rank) { transfer(rank, repeats); });
    print_row(out, backend, "send + recv_into", bytes, seconds / repeats);
  }
}

// A 4 KiB message goes back and forth; half a round trip is the one-way latency.
void latency_row(std::ostream& out, const std::string& backend, std::vector<std::unique_ptr<Communicator>>& comms,
                 Device device, const Settings& s, const std::function<void()>& sync = [] {}) {
  Tensor x = ones({1024}, DType::f32, device);
  int repeats = int(std::max(10.0, s.seconds_per_row / 50e-6));
  auto ping_pong = [&](int rank, int count) {
    for (int i = 0; i < count; ++i) {
      if (rank == 0) {
        comms[0]->send(x, 1, 1);
        comms[0]->recv(1, 2);
      } else {
        comms[1]->send(comms[1]->recv(0, 1), 0, 2);
      }
      sync();
    }
  };
  on_two_threads(comms, [&](int rank) { ping_pong(rank, 3); });
  double seconds = on_two_threads(comms, [&](int rank) { ping_pong(rank, repeats); });
  print_row(out, backend, "latency (ping-pong/2)", 4096, seconds / repeats / 2, /*with_bandwidth=*/false);
}

void bench_cpu(std::ostream& out, const Settings& s) {
  auto local = comm::local_group(2);
  bandwidth_rows(out, "local", local, Device::cpu(), s);
  latency_row(out, "local", local, Device::cpu(), s);
  if (!comm::gloo_available()) {
    out << "gloo     not built (no libgloo)\n";
    return;
  }
  // Two gloo ranks in this process: they connect through a store in memory, over loopback TCP.
  std::shared_ptr<comm::Store> store = comm::make_memory_store();
  std::vector<std::unique_ptr<Communicator>> gloo(2);
  auto second = std::async(std::launch::async, [&] { return comm::gloo_communicator(store, 1, 2); });
  gloo[0] = comm::gloo_communicator(store, 0, 2);
  gloo[1] = second.get();
  bandwidth_rows(out, "gloo", gloo, Device::cpu(), s);
  latency_row(out, "gloo", gloo, Device::cpu(), s);
}

void bench_gpu(std::ostream& out, const Settings& s) {
  if (cuda_device_count() == 0) {
    out << "gpu      no GPU: skipping the local hand-over, NCCL and device-copy rows\n";
    return;
  }
  Device gpu = Device::cuda(0);
  auto sync = [gpu] { device_synchronize(gpu); };
  // The ceiling: one device-to-device copy of the same bytes.
  for (int64_t bytes = 4096; bytes <= s.max_bytes; bytes *= 4) {
    Tensor x = ones({bytes / 4}, DType::f32, gpu), y = zeros({bytes / 4}, DType::f32, gpu);
    int repeats = repeats_for(bytes, s);
    ops::copy_(y, x);
    sync();
    auto start = Clock::now();
    for (int i = 0; i < repeats; ++i) ops::copy_(y, x);
    sync();
    double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    print_row(out, "cuda", "device copy (ceiling)", bytes, seconds / repeats);
  }
  auto local = comm::local_group(2, gpu);
  bandwidth_rows(out, "local", local, gpu, s, sync);
  latency_row(out, "local", local, gpu, s, sync);
  if (!comm::nccl_available()) {
    out << "nccl     not built\n";
    return;
  }
  // One rank sending to itself: the only NCCL transfer one GPU can do.
  auto nccl = comm::nccl_group({gpu});
  int tag = 100;
  for (int64_t bytes = 4096; bytes <= s.max_bytes; bytes *= 4, ++tag) {
    Tensor x = ones({bytes / 4}, DType::f32, gpu), y = zeros({bytes / 4}, DType::f32, gpu);
    int repeats = repeats_for(bytes, s);
    auto self = [&] {
      std::vector<P2P> ops = {P2P::send(x, 0, tag), P2P::recv_into(y, 0, tag)};
      nccl[0]->exchange(ops);
    };
    self();
    sync();
    auto start = Clock::now();
    for (int i = 0; i < repeats; ++i) self();
    sync();
    double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    print_row(out, "nccl", "self send + recv", bytes, seconds / repeats);
  }
}

const std::vector<cli::Flag<Settings>>& flags() {
  static const std::vector<cli::Flag<Settings>> table = {
      {"--quick", "", "messages up to 4 MiB, shorter runs",
       [](Settings& s, const std::string&) {
         s.max_bytes = int64_t(4) << 20;
         s.seconds_per_row = 0.05;
       },
       [](const Settings&) { return std::string("off: up to 256 MiB"); }},
  };
  return table;
}

std::string usage() {
  return "usage: brigade bench comm [flags]\n\n"
         "Point-to-point bandwidth and latency per backend, 4 KiB to 256 MiB. CPU: local (threads), gloo\n"
         "(loopback TCP). GPU: device copy (the ceiling), local hand-over, NCCL self send/recv.\n\n"
         "flags:\n" +
         cli::flag_lines(flags());
}

using Parsed = cli::Parsed<Settings>;

Parsed parse(const std::vector<std::string>& args) {
  Parsed p;
  cli::parse_flags(args, flags(), p.options, p.help);
  return p;
}

}  // namespace

int bench_comm_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  return cli::run_command(
      "brigade bench comm", out, err, [&] { return parse(args); }, usage,
      [&](const Settings& s) {
        out << "backend  transfer               size         time/message    bandwidth\n";
        bench_cpu(out, s);
        bench_gpu(out, s);
        return 0;
      });
}

}  // namespace brigade::bench_comm
