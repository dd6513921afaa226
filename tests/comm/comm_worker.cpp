// A rank of a multi-process test job, started by `brigade launch -n N -- comm_worker SCENARIO`.
// Each scenario checks its own results and exits 0 on success; on failure it prints
// "error: <what>" to stderr and exits 1, so tests/test_comm_gloo.cpp can read the launcher's
// prefixed output ("[rank 1] error: ...") and exit status.
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>

#include "brigade.h"
#include "kernels/ops.h"
#include "comm/comm.h"

using namespace brigade;
using comm::P2P;

namespace {

void check(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error("check failed: " + what);
}

bool equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && a.to_vector() == b.to_vector();
}

// The tensor rank `r` contributes: the same on every rank that recomputes it.
Tensor contribution(int r, DType dtype) {
  Generator gen(1000 + uint64_t(r));
  return ops::to_dtype(randn({33, 17}, DType::f64, Device::cpu(), &gen), dtype);
}

void run_ring(comm::Communicator& c) {
  int n = c.size(), next = (c.rank() + 1) % n, prev = (c.rank() + n - 1) % n;
  Tensor token = full({1000}, c.rank(), DType::f32);
  for (int step = 0; step < n; ++step) {
    std::vector<P2P> ops = {P2P::send(token, next, 5), P2P::recv(prev, 5)};
    c.exchange(ops);
    token = ops[1].tensor;
  }
  check(equal(token, full({1000}, c.rank(), DType::f32)), "the token came back");
  std::cout << "ring ok" << std::endl;
}

// Stage s multiplies by (s + 2) forward and backward; stages exchange in batches as 1F1B does.
void run_pipeline(comm::Communicator& c) {
  int s = c.rank(), stages = c.size(), micro_batches = 5;
  bool first = s == 0, last = s == stages - 1;
  double factor = s + 2, product = 1;
  for (int i = 0; i < stages; ++i) product *= i + 2;
  for (int direction = 0; direction < 2; ++direction) {  // 0: activations forward, 1: gradients back
    int from = direction == 0 ? s - 1 : s + 1, to = direction == 0 ? s + 1 : s - 1;
    bool source = direction == 0 ? first : last, sink = direction == 0 ? last : first;
    Tensor pending;
    for (int m = 0; m <= micro_batches; ++m) {
      std::vector<P2P> ops;
      if (pending.defined()) ops.push_back(P2P::send(pending, to, direction));
      if (m < micro_batches && !source) ops.push_back(P2P::recv(from, direction));
      c.exchange(ops);
      if (m == micro_batches) break;
      Tensor in = source ? full({4, 8}, direction == 0 ? m + 1 : 1, DType::f32) : ops.back().tensor;
      Tensor out = ops::scale_shift(in, factor, 0);
      if (sink) {
        double expected = direction == 0 ? (m + 1) * product : product;
        check(equal(out, full({4, 8}, expected, DType::f32)), "micro-batch " + std::to_string(m));
        pending = Tensor();
      } else {
        pending = out;
      }
    }
  }
  std::cout << "pipeline ok" << std::endl;
}

void run_collectives(comm::Communicator& c) {
  int n = c.size();
  for (DType dtype : {DType::f32, DType::f64, DType::bf16}) {
    Tensor mine = contribution(c.rank(), dtype);
    Tensor reference = zeros({33, 17}, DType::f64);
    for (int r = 0; r < n; ++r) ops::add_(reference, ops::to_dtype(contribution(r, dtype), DType::f64));
    Tensor sum = ops::clone(mine), average = ops::clone(mine);
    c.all_reduce(sum);
    c.all_reduce(average, comm::ReduceOp::average);
    double tolerance = dtype == DType::bf16 ? 0.05 : 1e-5;
    std::vector<double> got = sum.to_vector(), mean = average.to_vector(), want = reference.to_vector();
    for (size_t i = 0; i < want.size(); ++i) {
      check(std::abs(got[i] - want[i]) <= tolerance * (1 + std::abs(want[i])), "sum element " + std::to_string(i));
      check(std::abs(mean[i] - want[i] / n) <= tolerance * (1 + std::abs(want[i])),
            "mean element " + std::to_string(i));
    }
    // Every rank holds bitwise the same result: gather rank 0's through a broadcast and compare.
    Tensor from_zero = ops::clone(sum);
    c.broadcast(from_zero, 0);
    check(equal(from_zero, sum), std::string("identical sums on every rank, ") + dtype_name(dtype));
  }
  Tensor counts = full({3}, c.rank() + 1, DType::i64);
  c.all_reduce(counts);
  check(equal(counts, full({3}, n * (n + 1) / 2, DType::i64)), "integer sum");
  c.barrier();
  // Sub-groups: even and odd ranks, each averaging on its own.
  auto half = c.split(c.rank() % 2, c.rank());
  Tensor x = full({2}, c.rank(), DType::f32);
  half->all_reduce(x, comm::ReduceOp::average);
  double expected = 0;
  for (int r = c.rank() % 2; r < n; r += 2) expected += r;
  expected /= half->size();
  check(equal(x, full({2}, expected, DType::f32)), "sub-group average");
  std::cout << "collectives ok" << std::endl;
}

// The receiver's error is the root cause, but its abort makes the sender fail too, and the launcher
// would stop the receiver (SIGTERM) perhaps before it reports: ignore SIGTERM to see both.
void run_mismatch(comm::Communicator& c) {
  signal(SIGTERM, SIG_IGN);
  if (c.rank() == 0) c.send(zeros({2, 8}), 1, 4);
  else if (c.rank() == 1) c.recv_into(zeros({2, 4}), 0, 4);
}

// Rank 2 vanishes in the middle of a ring exchange; the others must fail, not hang. They ignore
// the launcher's SIGTERM so the test sees their own errors, and linger a moment before exiting so
// that rank 2 is, unambiguously, the first rank the launcher sees fail.
void run_dies(comm::Communicator& c) {
  signal(SIGTERM, SIG_IGN);
  int n = c.size(), next = (c.rank() + 1) % n, prev = (c.rank() + n - 1) % n;
  Tensor token = full({1 << 16}, c.rank(), DType::f32);
  try {
    for (int step = 0;; ++step) {
      if (c.rank() == 2 && step == 3) _exit(3);
      std::vector<P2P> ops = {P2P::send(token, next, 1), P2P::recv(prev, 1)};
      c.exchange(ops);
    }
  } catch (...) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    throw;
  }
}

// Rank 2 stops answering (but stays alive); the others time out.
void run_hangs(comm::Communicator& c) {
  if (c.rank() == 2) {
    std::this_thread::sleep_for(std::chrono::hours(1));
    return;
  }
  int n = c.size(), next = (c.rank() + 1) % n, prev = (c.rank() + n - 1) % n;
  std::vector<P2P> ops = {P2P::send(zeros({8}), next, 2), P2P::recv(prev, 2)};
  c.exchange(ops);
}

}  // namespace

int main(int argc, char** argv) {
  std::string scenario = argc > 1 ? argv[1] : "";
  try {
    if (scenario == "env") {  // no communicator: just where this rank is
      std::cout << comm::read_launch_env().str() << std::endl;
      return 0;
    }
    if (scenario == "address") {  // which address this rank would advertise (comm/address.h)
      comm::AdvertisedAddress a =
          comm::choose_address(comm::read_launch_env(), [](const char* name) { return std::getenv(name); });
      std::cout << "advertises " << a.address << " on " << a.interface << " (" << a.why << ")" << std::endl;
      return 0;
    }
    if (scenario == "wait") {  // no communicator: says so, then sleeps a minute (until stopped)
      std::cout << "waiting" << std::endl;
      std::this_thread::sleep_for(std::chrono::minutes(1));
      return 0;
    }
    if (scenario == "fail-once") {  // rank 1 fails on the job's first run only (brigade launch --max-restarts)
      const char* restart = std::getenv("BRIGADE_RESTART_COUNT");
      const std::string run = restart != nullptr ? restart : "none";
      if (comm::read_launch_env().rank == 1 && run == "0") {
        std::cerr << "failing on the first run" << std::endl;
        return 7;
      }
      if (run == "0") std::this_thread::sleep_for(std::chrono::minutes(1));  // stopped by the launcher
      std::cout << "run " << run << " ok" << std::endl;
      return 0;
    }
    if (scenario == "fail") {  // rank 1 fails at once; the others would run for a minute
      if (comm::read_launch_env().rank == 1) {
        std::cerr << "failing on purpose" << std::endl;
        return 7;
      }
      std::this_thread::sleep_for(std::chrono::minutes(1));
      return 0;
    }
    auto c = comm::connect();
    if (scenario == "ring") run_ring(*c);
    else if (scenario == "pipeline") run_pipeline(*c);
    else if (scenario == "collectives") run_collectives(*c);
    else if (scenario == "mismatch") run_mismatch(*c);
    else if (scenario == "dies") run_dies(*c);
    else if (scenario == "hangs") run_hangs(*c);
    else throw std::runtime_error("unknown scenario '" + scenario + "'");
    return 0;
  } catch (const std::exception& e) {
    std::cerr << std::string("error: ") + e.what() + "\n" << std::flush;  // one write: one whole line
    return 1;
  }
}
