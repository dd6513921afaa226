// The command that runs a planned configuration: `brigade launch -n N -- brigade train ...` with the
// plan's model, batch, stages, schedule, micro-batches, chunks and recomputation, and the memory
// budget for `--partition balanced`, which splits the layers as the planner did — at the same
// half-block grain, within the same per-rank memory — but from costs and stashes it measures.
// Only flags `brigade train` accepts (tests/test_plan.cpp parses the line with its parser).
#pragma once

#include <string>
#include <vector>

#include "options.h"
#include "pipeline/analysis/planner.h"

namespace brigade::plan_cli {

// The arguments after `brigade train`.
std::vector<std::string> train_arguments(const PlanOptions& options, const pipeline::Candidate& candidate);

// The whole line: `brigade launch -n N -- brigade train ...` (without the launcher when N = 1).
std::string run_command_line(const PlanOptions& options, const pipeline::Candidate& candidate);

}  // namespace brigade::plan_cli
