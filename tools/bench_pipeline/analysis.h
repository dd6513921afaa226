// What a measured pipeline step says, read off its trace (pipeline/trace.h). Pure functions of the
// trace, so they are tested on hand-made timelines.
//
// Time inside exchanges. The runtime runs each maximal run of SEND/RECV actions as one blocking
// exchange and traces every message of it with the exchange's span; a rank's *exchange time* is the
// union of those spans. With local communicators a send is a hand-over, so nearly all of it is
// waiting: for the peer to reach its side of the exchange (a bubble seen from this rank) or for the
// data. Two shares describe it:
//
//   exposed comm  = exchange time / the step's makespan: the part of the step this rank sat in
//                   exchanges instead of computing;
//   hidden        = the part of that exchange time during which at least one OTHER rank was
//                   computing, / the exchange time: message time the pipeline as a whole hid behind
//                   useful work. What is not hidden is time when this rank waited on a message and
//                   nobody computed — the whole pipeline stalled on communication.
#pragma once

#include <cstdint>
#include <vector>

#include "pipeline/analysis/simulator.h"
#include "pipeline/trace.h"

namespace brigade::bench_pipeline {

// The mean measured costs and their simulator form live with the trace (pipeline/trace.h): brigade
// train reports its bubble with the same ones.
using pipeline::ActionCosts;
using pipeline::mean_action_costs;
using pipeline::simulator_costs;

// One rank's time within one step, in seconds (see the top of the file).
struct RankTime {
  double compute = 0;   // sum of its F/B/I/W durations
  double exchange = 0;  // union of its exchanges' spans
  double hidden = 0;    // the part of `exchange` during which another rank computed
};
std::vector<RankTime> rank_times(const pipeline::Trace& trace);

// Total length of the union of [start, end) intervals.
double union_length(std::vector<std::pair<double, double>> intervals);
// Length of the intersection of two unions of intervals.
double overlap_length(std::vector<std::pair<double, double>> a, std::vector<std::pair<double, double>> b);

}  // namespace brigade::bench_pipeline
