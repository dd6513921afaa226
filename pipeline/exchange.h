// How the runtime turns a rank's action list into blocking steps, and the check that those steps
// cannot deadlock.
//
// The simulator treats a SEND as free and non-blocking (an isend with an infinite buffer). Real
// transports are not that generous: a gloo or NCCL send of a large tensor completes only once the
// peer has posted the matching receive. A rank that sends while its peer also sends, each waiting
// for the other to receive, hangs — the classic 1F1B deadlock. The runtime avoids it the way
// Megatron does (send_forward_recv_backward): every maximal run of consecutive SEND/RECV actions in
// a rank's list becomes ONE Communicator::exchange(), which posts all its sends and receives
// together and returns when all are done. Compute actions run one at a time between exchanges.
//
// check_exchanges() proves a schedule safe under that model — rendezvous semantics: a message moves
// only while its sender is blocked in the exchange holding the SEND and its receiver in the
// exchange holding the matching RECV; an exchange ends when all its messages moved. It fails with a
// ScheduleError and the marked rank x step grid (pipeline/grid.h) when some ranks would wait for
// each other forever.
#pragma once

#include <cstddef>
#include <vector>

#include "pipeline/schedule.h"

namespace brigade::pipeline {

// One blocking step of a rank: a single compute action, or one exchange of consecutive messages.
struct ExchangeStep {
  bool exchange = false;
  size_t first = 0;  // index of the step's first action in the rank's list
  size_t count = 0;  // how many actions (1 for compute)
};

// The steps of one rank's list, in order, covering every action exactly once.
std::vector<ExchangeStep> exchange_steps(const std::vector<Action>& actions);

// Throws ScheduleError (pipeline/simulator.h) when the schedule's exchanges can deadlock under
// rendezvous semantics, or when a RECV would be matched with a SEND of a different micro-batch or
// chunk. Assumes the schedule already passed simulate().
void check_exchanges(const Schedule& schedule);

// The same question for the NCCL transport as comm/nccl.cpp implements it today, which is stricter:
// an exchange whose messages carry headers (a channel's first message; every message when shapes
// vary) runs as two NCCL groups, the headers — which the host waits for — and then all the data,
// and NCCL matches the messages between two ranks by order. A batch that sends data and waits for a
// header its peer can send only after that data arrives then waits until the timeout (naive and
// GPipe always do). Throws ScheduleError naming the stuck ranks, with the grid; Pipeline calls it
// on NCCL communicators, so such a schedule is refused up front instead of timing out.
void check_exchanges_headers_first(const Schedule& schedule, bool varying_shapes);

}  // namespace brigade::pipeline
