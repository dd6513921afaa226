// Runs one function per rank on its own thread and collects what each threw, so tests can check
// every rank's outcome on the main thread (Catch2's assertions are not thread-safe).
#pragma once

#include <catch2/catch.hpp>

#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.h"

namespace test {

// errors[r] is empty when rank r returned normally, else what it threw.
inline std::vector<std::string> run_ranks(std::vector<std::unique_ptr<brigade::comm::Communicator>>& comms,
                                          const std::function<void(brigade::comm::Communicator&)>& body) {
  std::vector<std::string> errors(comms.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < comms.size(); ++r)
    threads.emplace_back([&, r] {
      try {
        body(*comms[r]);
      } catch (const std::exception& e) {
        errors[r] = e.what();
        if (errors[r].empty()) errors[r] = "(empty message)";
      }
    });
  for (std::thread& t : threads) t.join();
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
