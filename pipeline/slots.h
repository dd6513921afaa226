// Time slots: when each compute action of a schedule could run, on a clock of whole units where F,
// I and W take one unit and B two (B = I + W, as the simulator's default costs have it).
//
// Rank r's next step — one compute action, or an overlapped pair (Action::overlapped: an F and
// the backward after it, taking the sum of their units) — starts at
//
//   start = max(end of r's previous step, end of each input's producer)
//
// where F needs the F of the previous stage, B and I the B or I of the next stage (the last stage its
// own F), W its I; both halves of a pair share the pair's start and end. These are the simulator's
// times under its default costs. add_communication's lock_step placement keys every message by
// the end of the step that made it (pipeline/schedule.h).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "pipeline/schedule.h"

namespace brigade::pipeline {

// An order that can never finish: an action whose input is never computed, or ranks whose actions
// wait for each other in a cycle. what() names every stuck rank, its step and the input it waits
// for; `stuck` holds the same, for callers that name the places their own way (a schedule file's
// rows and cells).
class StuckOrder : public Error {
 public:
  struct Wait {
    int rank;
    size_t step;        // index in the rank's list
    std::string input;  // "F of micro-batch 0 on stage 1 (rank 1)"
  };
  StuckOrder(const std::string& what, std::vector<Wait> stuck) : Error(what), stuck(std::move(stuck)) {}
  std::vector<Wait> stuck;
};

struct Slot {
  int start = 0;
  int end = 0;  // for both halves of an overlapped pair: the pair's end
  bool operator==(const Slot&) const = default;
};

// slots[rank][i] for the i-th action of a compute-only schedule (messages are refused: they belong
// to one placement). Throws StuckOrder when the order can never finish.
std::vector<std::vector<Slot>> unit_slots(const Schedule& compute_only);

}  // namespace brigade::pipeline
