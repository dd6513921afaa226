// The rank x step grid: a schedule printed as a table, one column per rank, one line per step.
//
//   step  rank 0     rank 1
//      0  F0         recvA0<0
//      1  sendA0>1   F0
//      2  F1         sendA0... (see short_name in pipeline/action.h)
//
// The simulator prints it when a schedule fails, with marks on cells: '!' on the offending action(s)
// and '*' on the action each other rank was about to run (everything above a '*' has run).
#pragma once

#include <string>
#include <vector>

#include "pipeline/schedule.h"

namespace brigade::pipeline {

struct GridMark {
  int rank;
  int step;  // may equal the rank's list length: "something is missing after the last action"
  char symbol;
};

std::string action_grid(const Schedule& schedule, const std::vector<GridMark>& marks = {});

}  // namespace brigade::pipeline
