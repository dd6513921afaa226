// Driving a Trainer in the train tests: stepping it to a given step, and the checkpoint a resume test
// starts from.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <sstream>
#include <string>

#include "tools/train/trainer.h"

namespace test {

// Trains `t` until it has done `step` steps (none if it already has).
inline void train_to(brigade::train::Trainer& t, int64_t step) {
  while (t.step() < step) t.train_step();
}

// Trains a fresh run of `o` to `step`, saves it at `path`, and returns `o` set to resume from that file.
inline brigade::train::TrainOptions saved_at(const brigade::train::TrainOptions& o, int64_t step,
                                             const std::string& path) {
  {
    brigade::train::Trainer first(o);
    train_to(first, step);
    first.save(path);
  }
  brigade::train::TrainOptions again = o;
  again.resume = path;
  return again;
}

// Runs `one` on one device and `piped` through stages (and replicas) of the same model, data and
// seed, and requires the same losses up to the order of float sums: the replicas read disjoint parts
// of each step's rows, together the one device's batch.
inline void require_pipelined_losses_match(const brigade::train::TrainOptions& one,
                                           const brigade::train::TrainOptions& piped) {
  std::ostringstream a, b;
  const brigade::train::TrainSummary single = run_training(one, a), pipelined = run_training(piped, b);
  INFO(b.str());
  REQUIRE(pipelined.first_loss == Approx(single.first_loss).epsilon(1e-5));
  REQUIRE(pipelined.last_loss == Approx(single.last_loss).epsilon(1e-4));
  REQUIRE(pipelined.validation.back().second == Approx(single.validation.back().second).epsilon(1e-4));
}

}  // namespace test
