// Runs one function per rank on its own thread (comm::run_rank_threads) and gives back what each
// threw, as text, so tests can check every rank's outcome on the main thread (Catch2's assertions
// are not thread-safe). Unlike comm::run_local_ranks, a failing rank does not abort the others: a
// test sees what each rank meets on its own (one side refused, the other timed out).
#pragma once

#include <catch2/catch.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/local_ranks.h"

namespace test {

// errors[r] is empty when rank r returned normally, else what it threw. own_streams: each rank on a
// stream of its own where it has a GPU (as brigade train runs them); off, a test orders its streams.
inline std::vector<std::string> run_ranks(std::vector<std::unique_ptr<brigade::comm::Communicator>>& comms,
                                          const std::function<void(brigade::comm::Communicator&)>& body,
                                          bool own_streams = false) {
  brigade::comm::RankThreadOptions options;
  options.abort_peers = false;
  options.own_streams = own_streams;
  const brigade::comm::RankOutcomes outcomes =
      brigade::comm::run_rank_threads(comms, [&](int r) { body(*comms[size_t(r)]); }, options);
  std::vector<std::string> errors(comms.size());
  for (int r = 0; r < outcomes.size(); ++r) errors[size_t(r)] = outcomes.message(r);
  return errors;
}

// True when every rank returned normally; otherwise reports each rank's error (as Catch info on
// the next assertion) and returns false — for REQUIRE(all_ok(run_ranks(...))).
inline bool all_ok(const std::vector<std::string>& errors) {
  for (size_t r = 0; r < errors.size(); ++r)
    if (!errors[r].empty()) {
      UNSCOPED_INFO("rank " << r << ": " << errors[r]);
      return false;
    }
  return true;
}

}  // namespace test
