// --schedule, read once at the command line into a pipeline::ScheduleKind, for every command that
// takes one or a list of them (train, simulate, bench pipeline).
#pragma once

#include <string>

#include "core/error.h"
#include "pipeline/schedule.h"
#include "tools/cli/flags.h"

namespace brigade::cli {

// The schedule `text` names; a UsageError naming `flag` and the schedules otherwise
// ("--schedule: expected naive, gpipe, ... or dualpipev, got 'x'").
inline pipeline::ScheduleKind parse_schedule(const std::string& flag, const std::string& text) {
  for (pipeline::ScheduleKind kind : pipeline::all_schedule_kinds())
    if (text == pipeline::schedule_name(kind)) return kind;
  throw UsageError(flag + ": expected " + pipeline::schedule_names() + ", got '" + text + "'");
}

}  // namespace brigade::cli
