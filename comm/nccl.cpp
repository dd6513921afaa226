// The NCCL transport's calls (comm/nccl_communicator.h): an exchange in two rounds so that no send
// waits for a header, the collectives, connecting links before their first use, and splits. How a
// group is queued on a lane and followed to its end is in nccl_lanes.cpp.
#include "comm/nccl_communicator.h"

#include <algorithm>
#include <set>

#include "core/cuda/check.h"
#include "core/cuda/guard.h"
#include "core/factory.h"

namespace brigade::comm {

using namespace nccl_detail;

namespace {

ncclDataType_t nccl_dtype(DType t) {
  switch (t) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::bf16: return ncclBfloat16;
    case DType::f16: return ncclFloat16;
    case DType::i32: return ncclInt32;
    case DType::i64: return ncclInt64;
  }
  fail("comm nccl: unsupported dtype ", int(t));
}

}  // namespace

// An exchange in two rounds, so that no send waits for a header. On entering it, the headers go
// out (sent and received as one group, on their own communicator) and so does the early data:
// every send, and the receives whose tensors are known. Once the incoming headers are in, the late
// data: the receives that needed them. The host waits for nothing else, and never before its sends
// are queued — as a gloo rank posts every send before waiting for any header. Issuing the data
// only after the headers (the previous version) hung zb-v with one micro-batch: rank 0 held the token
// ids it sent rank 1 until a header arrived that rank 1 sends only after reading those ids on the
// host (the embedding's index check). check_exchanges_headers_first (pipeline/exchange_nccl.cpp)
// models exactly these rounds.
void NcclCommunicator::run_exchange(std::vector<Transfer>& transfers, const Deadline& deadline) {
  cuda::DeviceGuard guard(device().index);
  const std::string batch = transfers.size() == 1
                                ? transfers[0].what
                                : what("exchange of " + std::to_string(transfers.size()) + " transfers");
  const std::vector<bool> late = late_round(transfers);
  HeaderRound headers;
  if (std::any_of(transfers.begin(), transfers.end(), [](const Transfer& t) { return t.header; }))
    headers = post_headers(transfers, deadline);
  for (Transfer& t : transfers)
    if (t.op->kind == P2P::Kind::recv && !t.header) allocate_destination(*t.op, without_header(t));
  // The data to send, and the destinations, belong to the caller's stream. This also covers the
  // late round's destinations: nothing is queued on the caller's stream in between.
  for (size_t lane : {kUp, kDown}) follow_caller(lane);
  std::array<std::vector<Tensor>, kLanes> keep;
  enqueue_data(batch, deadline, transfers, late, false, keep);
  try {
    if (headers.arriving > 0) read_headers(transfers, headers, deadline);
    enqueue_data(batch, deadline, transfers, late, true, keep);
  } catch (...) {
    // The early round is queued and NCCL may still read or write its tensors: hand them to the
    // watchdog's list (kept until done, leaked on purpose if never) before the error unwinds.
    for (size_t lane : {kUp, kDown})
      if (!keep[lane].empty()) follow(batch, deadline, streams_[lane], std::move(keep[lane]));
    throw;
  }
  // The caller's stream waits only for what it will read: a lane that only sent is followed by the
  // watchdog (which keeps the tensors alive until NCCL is done with them) while the caller computes
  // on — the next forward need not wait for a neighbour to take the last activation.
  for (size_t lane : {kUp, kDown}) {
    if (keep[lane].empty()) continue;
    const bool receives = std::any_of(transfers.begin(), transfers.end(), [&](const Transfer& t) {
      return t.op->kind == P2P::Kind::recv && lane_of(t) == lane;
    });
    if (receives) finish(lane, batch, deadline, std::move(keep[lane]));
    else follow(batch, deadline, streams_[lane], std::move(keep[lane]));
  }
}

void NcclCommunicator::run_all_reduce(const Tensor& t, ReduceOp op, const Deadline& deadline) {
  current_stream(device()).wait(start_all_reduce(t, op, deadline, "all_reduce"));
}

// As run_all_reduce, but the caller's stream waits only when the returned function runs.
std::function<void()> NcclCommunicator::run_all_reduce_async(const Tensor& t, ReduceOp op,
                                                             const Deadline& deadline) {
  const Event done = start_all_reduce(t, op, deadline, "all_reduce_async");
  const Device d = device();
  return [done, d] { current_stream(d).wait(done); };
}

void NcclCommunicator::run_broadcast(const Tensor& t, int root, const Deadline& deadline) {
  cuda::DeviceGuard guard(device().index);
  std::string w = what("broadcast from rank " + std::to_string(root));
  follow_caller(kUp);
  enqueue(kUp, w, deadline, [&](ncclComm_t comm, cudaStream_t stream) {
    BRIGADE_NCCL_QUEUED(ncclBroadcast(t.raw_data(), t.raw_data(), size_t(t.numel()), nccl_dtype(t.dtype()), root,
                                      comm, stream));
  });
  finish(kUp, w, deadline, {t});
}

void NcclCommunicator::run_barrier(const Deadline& deadline) {
  // NCCL has no barrier: a one-element all-reduce that the host then waits for.
  cuda::DeviceGuard guard(device().index);
  std::string w = what("barrier");
  Tensor token = zeros({1}, DType::i32, device());
  follow_caller(kUp);
  // After this rank's transfers in both directions, as when one stream carried all the data.
  Event down = Event::create(device());
  down.record(streams_[kDown]);
  streams_[kUp].wait(down);
  enqueue(kUp, w, deadline, [&](ncclComm_t comm, cudaStream_t stream) {
    BRIGADE_NCCL_QUEUED(ncclAllReduce(token.raw_data(), token.raw_data(), 1, ncclInt32, ncclSum, comm, stream));
  });
  finish(kUp, w, deadline, {token});
  wait_for_stream(w, deadline, streams_[kUp]);
}

// NCCL connects a link (a peer and a direction, on one NCCL communicator) the first time a group
// uses it, and the host waits in that group until the peer's group sets up the mirror direction
// (NCCL's source: src/transport.cc, ncclTransportP2pSetup; the emulator models it). An exchange
// issues its sends before its receives that wait for headers, on another lane, so the first
// exchange of two ranks that send each other data would already wait in a cycle, and a V with few
// micro-batches waits across exchanges. So every link is connected here, lane by lane in a fixed
// order: one group per lane holding a one-word message on each of this rank's links the lane
// carries (a data lane its own direction, the header lane every link), which every peer mirrors
// in its own group; then the host waits for them, as for a barrier.
void NcclCommunicator::run_connect(const std::vector<Link>& links, const Deadline& deadline) {
  cuda::DeviceGuard guard(device().index);
  const int me = rank();
  for (size_t lane : {kUp, kDown, kHeaders}) {
    std::vector<size_t> mine;
    for (size_t i = 0; i < links.size(); ++i) {
      const Link& l = links[i];
      const bool carried = lane == kHeaders || data_lane(l.from, l.to) == lane;
      if (carried && (l.from == me || l.to == me)) mine.push_back(i);
    }
    if (mine.empty()) continue;  // the peers of this lane's links skip it too: none involves us
    const std::string w = what("connect, " + std::to_string(mine.size()) + " link(s) on " +
                               (lane == kUp ? "the upward data" : lane == kDown ? "the downward data" : "the header") +
                               " communicator");
    // One word per end of each link, so no two transfers of a group touch the same memory. Made
    // and zeroed on the lane's own stream, which orders the group after them without the lane
    // waiting for the caller's stream: the header lane never does (post_headers).
    Tensor words;
    {
      StreamGuard on_lane(streams_[lane]);
      words = zeros({int64_t(2 * links.size())}, DType::i32, device());
    }
    int32_t* word = static_cast<int32_t*>(words.raw_data());
    try {
      enqueue(lane, w, deadline, [&](ncclComm_t comm, cudaStream_t stream) {
        for (size_t i : mine) {
          const Link& l = links[i];
          if (l.from == me) BRIGADE_NCCL_QUEUED(ncclSend(word + 2 * i, 1, ncclInt32, l.to, comm, stream));
          else BRIGADE_NCCL_QUEUED(ncclRecv(word + 2 * i + 1, 1, ncclInt32, l.from, comm, stream));
        }
      });
    } catch (...) {
      // The group may be queued (the deadline passed while NCCL set the links up) and its job may
      // still write the words: the watchdog keeps them until it is done, as in run_exchange.
      follow(w, deadline, streams_[lane], {words});
      throw;
    }
    follow(w, deadline, streams_[lane], {words});
    wait_for_stream(w, deadline, streams_[lane]);
  }
}

// NCCL connects a collective algorithm's channels (a ring, a tree) the first time one of a
// communicator's groups runs a collective with it, inside ncclGroupEnd, and that group's launch
// waits until the ring's or tree's neighbours reach the same first use (NCCL's source: src/group.cc,
// ncclCollPreconnect; the emulator models it). enqueue polls that wait holding mutex_ (so the
// watchdog and an abort wait too), and an all_reduce_async started mid-backward would hold the host
// there. So each use runs once here, on zeros, in the order Communicator::connect_collectives put them
// in (sorted and without repeats: the same on every rank): the calls to come then pick the
// same algorithms, already connected. The host waits for them, as for a barrier.
void NcclCommunicator::run_connect_collectives(const std::vector<CollectiveUse>& uses, const Deadline& deadline) {
  cuda::DeviceGuard guard(device().index);
  for (const CollectiveUse& use : uses) {
    Tensor scratch;
    {
      StreamGuard on_lane(streams_[kUp]);  // made on the lane's stream, which orders the call after it
      scratch = zeros({use.numel}, use.dtype, device());
    }
    if (use.kind == CollectiveUse::Kind::broadcast) run_broadcast(scratch, 0, deadline);
    else run_all_reduce(scratch, use.op, deadline);
  }
  wait_for_stream(what("connect of " + std::to_string(uses.size()) + " collectives"), deadline, streams_[kUp]);
}

std::unique_ptr<Communicator> NcclCommunicator::run_split(int color, int key, const std::vector<int>& members,
                                                          const Deadline& deadline) {
  cuda::DeviceGuard guard(device().index);
  std::string w = what("split");
  // A non-blocking split is a job of the PARENT, and NCCL writes the child's handle only when that
  // job is done (until then it is null): poll the parent, then the child's own initialisation.
  // The handle lives on the heap — if the deadline passes first, the job may still write it after
  // this function has returned, so on a timeout it is left behind on purpose.
  // The communicators split alike, in the order of their lanes (every rank in the same order).
  NcclComms made{};
  auto abort_made = [&] { abort_all(made); };
  for (size_t lane = 0; lane < kLanes; ++lane) {
    ncclConfig_t config = lane_config(lane);
    ncclResult_t result;
    std::string error;
    auto* child = new ncclComm_t(nullptr);
    {
      // The parent is read, used and asked for its error under the lock: an abort (the watchdog's,
      // a peer's failure) frees it.
      std::lock_guard<std::mutex> lock(mutex_);
      ncclComm_t parent = comms_[lane];
      if (parent == nullptr) {
        delete child;
        abort_made();
        throw AbortedError(w + ": the communicator was aborted");
      }
      result = outcome(parent, ncclCommSplit(parent, members.empty() ? NCCL_SPLIT_NOCOLOR : color, key, child, &config),
                       deadline);
      if (result == ncclSuccess && *child != nullptr) result = poll_ready(*child, deadline);
      if (result != ncclSuccess && result != ncclInProgress) error = nccl_error(parent, result);
    }
    if (result == ncclInProgress) {
      abort_made();
      abort(w + " timed out");  // stops the parent's job, so it writes nothing more
      fail_timeout(w, deadline);
    }
    made[lane] = *child;
    delete child;
    if (result != ncclSuccess) {
      abort_made();
      fail(w, ": ", error);
    }
  }
  if (members.empty()) return nullptr;
  if (std::find(made.begin(), made.end(), nullptr) != made.end()) {
    abort_made();
    fail(w, ": NCCL reported success but made no communicator");
  }
  int index = int(std::find(members.begin(), members.end(), rank()) - members.begin());
  return std::make_unique<NcclCommunicator>(made, index, int(members.size()), device(), timeout());
}

// The data lane of a transfer (data_lane).
Lane NcclCommunicator::lane_of(const Transfer& t) const {
  return t.op->kind == P2P::Kind::send ? data_lane(rank(), t.op->peer) : data_lane(t.op->peer, rank());
}

// Which transfers of an exchange go in its late round (run_exchange): a receive that needs a
// header, and every receive after it from the same peer — NCCL pairs a link's messages by their
// order, so they must not overtake it. A message to this very rank goes late, send and receive
// alike: they must meet in one group.
std::vector<bool> NcclCommunicator::late_round(const std::vector<Transfer>& transfers) const {
  std::vector<bool> late(transfers.size(), false);
  std::set<int> waiting;  // peers whose messages to this rank wait for a header
  for (size_t i = 0; i < transfers.size(); ++i) {
    const P2P& op = *transfers[i].op;
    const bool receive = op.kind == P2P::Kind::recv;
    if (receive && (transfers[i].header || waiting.count(op.peer) > 0)) waiting.insert(op.peer);
    late[i] = op.peer == rank() || (receive && waiting.count(op.peer) > 0);
  }
  return late;
}

// Queues one round of an exchange's data: a group on each data lane that has transfers in it.
// `keep` collects, per lane, the tensors NCCL reads or writes.
void NcclCommunicator::enqueue_data(const std::string& w, const Deadline& deadline, std::vector<Transfer>& transfers,
                                    const std::vector<bool>& late, bool late_round,
                                    std::array<std::vector<Tensor>, kLanes>& keep) {
  for (size_t lane : {kUp, kDown}) {
    std::vector<P2P*> group;
    for (size_t i = 0; i < transfers.size(); ++i)
      if (late[i] == late_round && lane_of(transfers[i]) == lane) group.push_back(transfers[i].op);
    if (group.empty()) continue;
    enqueue(lane, w, deadline, [&](ncclComm_t comm, cudaStream_t stream) {
      for (P2P* op : group) {
        const Tensor& x = op->tensor;
        keep[lane].push_back(x);
        if (x.numel() == 0) continue;
        const size_t count = size_t(x.numel());
        if (op->kind == P2P::Kind::send)
          BRIGADE_NCCL_QUEUED(ncclSend(x.raw_data(), count, nccl_dtype(x.dtype()), op->peer, comm, stream));
        else
          BRIGADE_NCCL_QUEUED(ncclRecv(x.raw_data(), count, nccl_dtype(x.dtype()), op->peer, comm, stream));
      }
    });
  }
}

// Queues the all-reduce on the kUp lane after the caller's work; returns the event that marks its
// end (the watchdog follows it and keeps `t` alive until then).
Event NcclCommunicator::start_all_reduce(const Tensor& t, ReduceOp op, const Deadline& deadline,
                                         const std::string& name) {
  cuda::DeviceGuard guard(device().index);
  const std::string w = what(name + (op == ReduceOp::sum ? "(sum)" : "(average)"));
  follow_caller(kUp);
  enqueue(kUp, w, deadline, [&](ncclComm_t comm, cudaStream_t stream) {
    BRIGADE_NCCL_QUEUED(ncclAllReduce(t.raw_data(), t.raw_data(), size_t(t.numel()), nccl_dtype(t.dtype()),
                                      op == ReduceOp::sum ? ncclSum : ncclAvg, comm, stream));
  });
  Event done = Event::create(device());
  done.record(streams_[kUp]);
  follow(w, deadline, streams_[kUp], {t});
  return done;
}

// Headers (handshake.h) must reach the host before their data can be received: they travel on a
// communicator and stream of their own (kHeaders), through a small device buffer. Queues the
// exchange's headers, sent and received as one group, and the copies of the arriving ones to
// pinned memory; read_headers waits for them. Nothing here waits for the caller's stream or a
// data stream, so a header is never queued behind data.
NcclCommunicator::HeaderRound NcclCommunicator::post_headers(std::vector<Transfer>& transfers,
                                                             const Deadline& deadline) {
  constexpr int64_t kWords = int64_t(sizeof(WireHeader) / sizeof(uint64_t));
  const size_t n = transfers.size();
  HeaderRound round;
  round.arriving = size_t(std::count_if(transfers.begin(), transfers.end(), [](const Transfer& t) {
    return t.header && t.op->kind == P2P::Kind::recv;
  }));
  BRIGADE_CHECK(round.arriving <= kPinnedHeaders, what("exchange of " + std::to_string(n) + " transfers"), ": ",
                round.arriving, " of its receives wait for a header, more than the ", kPinnedHeaders,
                " one exchange may hold; split it into several");
  Tensor slots;
  {
    // Allocated on the header stream: the allocator reuses the block only after that stream's
    // work, and nothing orders it after the caller's stream (which may wait for peers).
    StreamGuard on_headers(streams_[kHeaders]);
    slots = empty({int64_t(n) * kWords}, DType::i64, device());
  }
  auto slot = [&](size_t i) { return static_cast<int64_t*>(slots.raw_data()) + int64_t(i) * kWords; };
  cudaStream_t stream = raw(kHeaders);
  std::vector<WireHeader> outgoing(n);
  for (size_t i = 0; i < n; ++i) {
    Transfer& t = transfers[i];
    if (!t.header || t.op->kind != P2P::Kind::send) continue;
    outgoing[i] = encode_header(TensorMeta::of(t.op->tensor, t.op->shapes));
    // From pageable memory: copied to a staging buffer before the call returns, so `outgoing` may go.
    BRIGADE_CUDA_CHECK(cudaMemcpyAsync(slot(i), &outgoing[i], sizeof(WireHeader), cudaMemcpyHostToDevice, stream));
  }
  // Named after its transfers: a failure here (say, NCCL refusing a lone receive) is theirs.
  size_t headered = 0;
  for (const Transfer& t : transfers) headered += t.header ? 1 : 0;
  std::string w;
  for (const Transfer& t : transfers)
    if (t.header && headered == 1) w = t.what + " (its header)";
  if (w.empty()) w = what("header exchange of " + std::to_string(headered) + " transfers");
  enqueue(kHeaders, w, deadline, [&](ncclComm_t comm, cudaStream_t on) {
    for (size_t i = 0; i < n; ++i) {
      Transfer& t = transfers[i];
      if (!t.header) continue;
      if (t.op->kind == P2P::Kind::send)
        BRIGADE_NCCL_QUEUED(ncclSend(slot(i), size_t(kWords), ncclInt64, t.op->peer, comm, on));
      else
        BRIGADE_NCCL_QUEUED(ncclRecv(slot(i), size_t(kWords), ncclInt64, t.op->peer, comm, on));
    }
  });
  round.landing.assign(n, 0);
  size_t next = 0;
  for (size_t i = 0; i < n; ++i) {
    Transfer& t = transfers[i];
    if (!t.header || t.op->kind != P2P::Kind::recv) continue;
    // Into pinned memory, so the copy is truly asynchronous and the host can wait with a deadline
    // (a copy into pageable memory would block right here, maybe forever).
    round.landing[i] = next++;
    BRIGADE_CUDA_CHECK(
        cudaMemcpyAsync(pinned_ + round.landing[i], slot(i), sizeof(WireHeader), cudaMemcpyDeviceToHost, stream));
  }
  follow(w, deadline, streams_[kHeaders], {slots});  // the watchdog bounds them, sends included
  return round;
}

// Waits for the arriving headers and gives their receives destinations. Only a channel's first
// message carries one, or every message of a varying-shape channel: the host waits for its
// messages where a rank of the gloo transport would, and every schedule gloo can run, NCCL runs.
void NcclCommunicator::read_headers(std::vector<Transfer>& transfers, const HeaderRound& round,
                                    const Deadline& deadline) {
  for (Transfer& t : transfers)
    if (t.header && t.op->kind == P2P::Kind::recv) {
      wait_for_stream(t.what + " (its header)", deadline, streams_[kHeaders]);
      break;
    }
  for (size_t i = 0; i < transfers.size(); ++i) {
    Transfer& t = transfers[i];
    if (!t.header || t.op->kind != P2P::Kind::recv) continue;
    TensorMeta sent = decode_header(pinned_[round.landing[i]], "rank " + std::to_string(t.op->peer));
    on_header(t, sent);
    allocate_destination(*t.op, sent);
  }
}

}  // namespace brigade::comm
