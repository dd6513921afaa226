// `brigade curves`: redraws a run's loss curves (tools/train/loss_curve.h) from its --metrics file —
// while the run is still going (the file is flushed line by line), after it, or on another machine
// the file was copied to. tools/brigade.cpp dispatches here.
//
// Named for what it draws, as `brigade train --curves` names the picture the run writes at its end:
// given the same file, the two are the same bytes. Its own command rather than a flag of train,
// since it trains nothing and needs no model.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace brigade::curves_cli {

// Runs `brigade curves <args>`; returns the exit status (2: bad command line, 1: an error).
int curves_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace brigade::curves_cli
