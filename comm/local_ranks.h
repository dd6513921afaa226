// Ranks as threads: one function run for every rank of a group, each rank on a thread of its own.
//
//   auto world = comm::local_group(4);
//   std::vector<double> losses = comm::run_local_ranks(world, [&](comm::Communicator& comm) {
//     return train_stage(comm);                      // a value per rank, or nothing
//   });
//
// What every program that runs its ranks as threads needs, written once:
// - each rank whose device is a GPU runs on a stream of its own (core/stream.h), so the ranks'
//   kernels overlap as they would on separate GPUs;
// - a rank that throws aborts every rank's communicator, so the others stop at their next (or
//   current) call instead of waiting out their timeout;
// - when all have ended, the root cause is rethrown: the first failure that was not an AbortedError
//   (comm/communicator.h) — the errors the others get because of the abort are told apart by their
//   type, never by their words. It keeps its type: a brigade::Error, comm::TimeoutError or
//   comm::AbortedError comes back as the same type with "rank r of n: " in front of its message;
//   any other type (the caller's own, a library's, a subclass brigade cannot rebuild) is rethrown as
//   it was thrown — its message cannot be amended — and run_rank_threads() says which rank threw it.
//
// An abort reaches what the runner can see: the communicators it was given, and (local backend)
// every group split from them, which share their fate. A group split from an NCCL communicator has
// communicators of its own; a rank waiting on one ends by its timeout.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "comm/communicator.h"

namespace brigade::comm {

struct RankThreadOptions {
  // A rank that fails aborts every rank's communicator. Off for tests that examine what each rank
  // meets on its own (a mismatch refused on one side, a timeout on the other).
  bool abort_peers = true;
  // Each rank whose communicator moves GPU tensors runs on a new stream of that GPU.
  bool own_streams = true;
};

// How every rank of a run ended.
class RankOutcomes {
 public:
  struct Outcome {
    std::exception_ptr error;  // null: the rank returned
    int order = -1;            // among the failures, 0 for the first to reach the runner
    bool aborted = false;      // what it threw was an AbortedError: a consequence of another failure
  };
  explicit RankOutcomes(std::vector<Outcome> outcomes) : outcomes_(std::move(outcomes)) {}

  int size() const { return int(outcomes_.size()); }
  bool ok() const { return root_cause() < 0; }
  const Outcome& at(int rank) const { return outcomes_.at(size_t(rank)); }
  // What rank `rank` threw, as text; empty when it returned.
  std::string message(int rank) const;
  // The rank whose failure is the root cause: the first failure that was not an AbortedError, else
  // the first failure (every rank was aborted from outside); -1 when every rank returned.
  int root_cause() const;
  // Rethrows the root cause as the header above says; returns when every rank returned.
  void rethrow() const;

 private:
  std::vector<Outcome> outcomes_;
};

// Runs body(r) for r = 0 .. world.size() - 1, each on a thread of its own, and waits for all.
RankOutcomes run_rank_threads(const std::vector<std::unique_ptr<Communicator>>& world,
                              const std::function<void(int rank)>& body, RankThreadOptions options = {});

// Runs fn(*world[r]) on every rank and returns what each returned (nothing when fn returns void);
// when a rank fails, rethrows the root cause after every rank has ended.
template <class Fn>
auto run_local_ranks(const std::vector<std::unique_ptr<Communicator>>& world, Fn&& fn,
                     RankThreadOptions options = {}) {
  using Result = std::invoke_result_t<Fn&, Communicator&>;
  if constexpr (std::is_void_v<Result>) {
    run_rank_threads(world, [&](int r) { fn(*world[size_t(r)]); }, options).rethrow();
  } else {
    std::vector<std::optional<Result>> results(world.size());
    run_rank_threads(world, [&](int r) { results[size_t(r)].emplace(fn(*world[size_t(r)])); }, options).rethrow();
    std::vector<Result> out;
    out.reserve(results.size());
    for (std::optional<Result>& result : results) out.push_back(std::move(*result));
    return out;
  }
}

}  // namespace brigade::comm
