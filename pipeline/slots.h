// Time slots: when each compute action of a schedule could run if every action took one unit.
//
// Rank r's k-th compute action gets slot
//
//   slot = max(slot of r's previous compute action + 1, slot of each input's producer + 1)
//
// where F needs the F of the previous stage, B and I the B or I of the next stage (the last stage its
// own F), W its I. With F = I = W = 1 these are the simulator's start times. add_communication's
// lock_step placement trades every slot's messages in one exchange after the slot
// (pipeline/schedule.h); the schedule-file writer could align rows by them.
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

// slots[rank][i] for the i-th action of a compute-only schedule (messages are refused: they belong
// to one placement). Throws StuckOrder when the order can never finish.
std::vector<std::vector<int>> unit_slots(const Schedule& compute_only);

}  // namespace brigade::pipeline
