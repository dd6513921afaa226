// comm::run_local_ranks: ranks as threads, one failure ending them all, the root cause rethrown.
#include <chrono>
#include <stdexcept>
#include <thread>

#include "comm/comm.h"
#include "test_util.h"

using namespace brigade;
using Catch::Contains;
using Catch::StartsWith;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// A caller's own error type: the runner must give it back as it is, not as a brigade::Error.
struct Diverged : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A brigade::Error subclass the runner does not know: kept, not sliced to an Error.
struct StageError : Error {
  using Error::Error;
};

// Long enough that a peer left waiting for it would fail the time bounds below by far.
constexpr auto kLongTimeout = std::chrono::milliseconds(20000);

}  // namespace

TEST_CASE("run_local_ranks: returns what each rank returned, in rank order", "[comm][local][ranks]") {
  auto world = comm::local_group(3);
  std::vector<int64_t> got = comm::run_local_ranks(world, [](comm::Communicator& c) {
    Tensor t = full({1}, double(c.rank() + 1), DType::i64);
    c.all_reduce(t);  // the ranks really ran together
    return t.data<int64_t>()[0] * 10 + c.rank();
  });
  REQUIRE(got == std::vector<int64_t>{60, 61, 62});
}

TEST_CASE("run_local_ranks: a rank's TimeoutError comes back as one, naming the rank; the peers are released",
          "[comm][local][ranks]") {
  auto world = comm::local_group(3, Device::cpu(), kLongTimeout);
  const auto start = Clock::now();
  try {
    comm::run_local_ranks(world, [](comm::Communicator& c) {
      if (c.rank() == 1) throw comm::TimeoutError("the data loader timed out");
      c.recv(1);  // never sent: only the abort ends this wait early
    });
    FAIL("run_local_ranks returned although rank 1 threw");
  } catch (const comm::TimeoutError& e) {
    CHECK_THAT(e.what(), StartsWith("rank 1 of 3: the data loader timed out"));
  }
  CHECK(seconds_since(start) < 5);  // not the peers' 20 s timeout
}

TEST_CASE("run_local_ranks: an exception of the caller's own type comes back as that type",
          "[comm][local][ranks]") {
  auto world = comm::local_group(3, Device::cpu(), kLongTimeout);
  auto body = [](comm::Communicator& c) {
    if (c.rank() == 2) throw Diverged("loss is nan at step 7");
    c.barrier();  // rank 2 never comes
  };
  const auto start = Clock::now();
  REQUIRE_THROWS_AS(comm::run_local_ranks(world, body), Diverged);
  CHECK(seconds_since(start) < 5);

  // Its message cannot be amended; the outcomes name the rank, and tell the peers' aborts apart.
  auto again = comm::local_group(3, Device::cpu(), kLongTimeout);
  const comm::RankOutcomes outcomes = comm::run_rank_threads(again, [&](int r) { body(*again[size_t(r)]); });
  REQUIRE(outcomes.root_cause() == 2);
  CHECK(outcomes.message(2) == "loss is nan at step 7");
  for (int r : {0, 1}) {
    CHECK(outcomes.at(r).aborted);
    CHECK_THAT(outcomes.message(r), Contains("rank 2 of 3 failed: loss is nan at step 7"));
  }

  auto third = comm::local_group(2, Device::cpu(), kLongTimeout);
  REQUIRE_THROWS_AS(comm::run_local_ranks(third,
                                          [](comm::Communicator& c) {
                                            if (c.rank() == 0) throw StageError("stage 0 refused its input");
                                            c.recv(0);
                                          }),
                    StageError);
}

TEST_CASE("run_local_ranks: with two failures the root cause wins, never a peer's abort, whatever its words",
          "[comm][local][ranks]") {
  SECTION("the abort's consequence reaches the runner first") {
    // Rank 0 aborts the group before it throws, so rank 1's AbortedError is the first failure in
    // time. The root cause's text holds "failed:" and "abort", which matching words would skip.
    auto world = comm::local_group(2, Device::cpu(), kLongTimeout);
    comm::RankOutcomes outcomes = comm::run_rank_threads(world, [&](int r) {
      comm::Communicator& c = *world[size_t(r)];
      if (r == 1) {
        c.recv(0);
        return;
      }
      c.abort("stopping the others first");
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      fail("step 3 failed: the loss scaler had to abort (inf gradients)");
    });
    REQUIRE(outcomes.at(1).error);
    CHECK(outcomes.at(1).aborted);
    CHECK(outcomes.at(1).order == 0);  // first in time, yet not the cause
    REQUIRE(outcomes.root_cause() == 0);
    REQUIRE_THROWS_AS(outcomes.rethrow(), Error);
    REQUIRE_THROWS_WITH(outcomes.rethrow(),
                        "rank 0 of 2: step 3 failed: the loss scaler had to abort (inf gradients)");
  }
  SECTION("two failures of their own: the first") {
    auto world = comm::local_group(2, Device::cpu(), kLongTimeout);
    REQUIRE_THROWS_WITH(comm::run_local_ranks(world,
                                              [](comm::Communicator& c) {
                                                if (c.rank() == 1) fail("rank 1's own problem");
                                                std::this_thread::sleep_for(std::chrono::milliseconds(300));
                                                throw Diverged("rank 0's later problem");
                                              }),
                        "rank 1 of 2: rank 1's own problem");
  }
}

TEST_CASE("run_local_ranks: without abort_peers a failing rank leaves the others to their own outcome",
          "[comm][local][ranks]") {
  auto world = comm::local_group(2, Device::cpu(), std::chrono::milliseconds(300));
  comm::RankThreadOptions options;
  options.abort_peers = false;
  const comm::RankOutcomes outcomes = comm::run_rank_threads(
      world,
      [&](int r) {
        if (r == 0) fail("rank 0 gave up");
        world[1]->recv(0);
      },
      options);
  CHECK(outcomes.root_cause() == 0);
  CHECK_FALSE(outcomes.at(1).aborted);
  CHECK_THAT(outcomes.message(1), Contains("timed out after 0.3 s"));  // its own timeout, not an abort
}

TEST_CASE("AbortedError: a call that ends because of an abort says so by its type, a fault of its own does not",
          "[comm][local][ranks]") {
  auto world = comm::local_group(2, Device::cpu(), kLongTimeout);
  world[0]->abort("stopped by the test");
  CHECK_THROWS_AS(world[0]->barrier(), comm::AbortedError);  // this communicator, aborted earlier
  CHECK_THROWS_AS(world[1]->recv(0), comm::AbortedError);    // its peer, through the shared world

  auto slow = comm::local_group(2, Device::cpu(), std::chrono::milliseconds(200));
  try {
    slow[0]->recv(1);  // nobody sends: this call's own timeout
    FAIL("the receive returned");
  } catch (const comm::AbortedError& e) {
    FAIL("a timeout of the call's own came back as an AbortedError: " << e.what());
  } catch (const comm::TimeoutError&) {
  }
  CHECK_THROWS_AS(slow[0]->recv(1), comm::AbortedError);  // the timeout aborted it: later calls are refused
}
