// make_checkpoint_dir as every process of a launched run calls it: at once, on one missing folder.
#include <catch2/catch.hpp>

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "temp_dir.h"
#include "tools/train/checkpoint_dir.h"

using namespace brigade;

TEST_CASE("train: ranks creating the --save folder at once all succeed", "[train][checkpoint]") {
  // A rank that found no folder, then saw another rank's new one, took it for a file and failed
  // ("exists but is not a directory"; seen once under ThreadSanitizer's slower timing). Threads
  // released together stand in for the processes: many rounds, so the window is hit.
  test::TempDir tmp("brigade_checkpoint_dir");
  constexpr int kRanks = 8, kRounds = 200;
  int failures = 0;
  std::string first_error;
  for (int round = 0; round < kRounds; ++round) {
    const std::string dir = tmp.file("run" + std::to_string(round)) + "/";
    std::atomic<int> ready{0};
    std::vector<std::string> errors(kRanks);
    std::vector<std::thread> ranks;
    for (int r = 0; r < kRanks; ++r)
      ranks.emplace_back([&, r] {
        ready.fetch_add(1);
        while (ready.load() < kRanks) std::this_thread::yield();
        try {
          train::make_checkpoint_dir(dir);
        } catch (const std::exception& e) {
          errors[r] = e.what();
        }
      });
    for (std::thread& t : ranks) t.join();
    for (const std::string& e : errors)
      if (!e.empty() && failures++ == 0) first_error = e;
    REQUIRE(std::filesystem::is_directory(dir));
  }
  INFO(first_error);
  REQUIRE(failures == 0);
}
