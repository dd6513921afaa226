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
// ScheduleError and the marked rank x step grid (pipeline/analysis/grid.h) when some ranks would wait for
// each other forever.
#pragma once

#include <cstddef>
#include <vector>

#include "pipeline/schedule.h"

namespace brigade::comm {
class Communicator;
}

namespace brigade::pipeline {

// One blocking step of a rank: a single compute action, or one exchange of consecutive messages.
struct ExchangeStep {
  bool exchange = false;
  size_t first = 0;  // index of the step's first action in the rank's list
  size_t count = 0;  // how many actions (1 for compute)
};

// The steps of one rank's list, in order, covering every action exactly once.
std::vector<ExchangeStep> exchange_steps(const std::vector<Action>& actions);

// Throws ScheduleError (pipeline/analysis/simulator.h) when the schedule's exchanges can deadlock under
// rendezvous semantics, or when a RECV would be matched with a SEND of a different micro-batch or
// chunk. Assumes the schedule already passed simulate().
void check_exchanges(const Schedule& schedule);

// The same question for the NCCL transport as comm/nccl.cpp implements it: NCCL matches the
// messages between two ranks by order and runs each communicator's groups in order on a stream,
// while the host goes on. Headers (a channel's first message; every message when shapes vary) go
// on a communicator and stream of their own; data to a higher rank on a second, to a lower rank on
// a third. On entering an exchange the host queues its headers and every send (with the receives
// whose tensors are known); it waits for the arriving headers, if any, and then queues the
// receives that needed them. The model also has every host read the data it received at once (an
// index check on received ids, a loss's item()): the worst case, so a schedule that passes cannot
// hang wherever the host reads. Every schedule check_exchanges accepts passes; Pipeline still calls
// it on NCCL communicators, so a transport change that broke that would be refused up front, by
// name, not time out.
void check_exchanges_headers_first(const Schedule& schedule, bool varying_shapes);

// The checks above that `comm`'s transport needs, for a schedule about to run on it, asked of its
// capabilities: check_exchanges where a send may wait for its receiver (not queues_sends()), and
// check_exchanges_headers_first where messages are paired by order (matches_messages_in_order()).
// A schedule that fails is refused with the marked grid rather than left to hang.
void check_exchanges_for(const comm::Communicator& comm, const Schedule& schedule, bool varying_shapes);

}  // namespace brigade::pipeline
