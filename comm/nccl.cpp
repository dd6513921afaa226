#include "comm/nccl.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <iostream>
#include <mutex>
#include <set>
#include <thread>

#include "comm/nccl_check.h"
#include "core/cuda/check.h"
#include "core/cuda/guard.h"
#include "core/cuda/module_loading.h"
#include "core/factory.h"
#include "core/stream.h"

namespace brigade::comm {

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

ncclConfig_t nonblocking_config() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // calls return ncclInProgress instead of blocking; we poll against deadlines
  return config;
}

// Polls a communicator that is being created, split, or is enqueuing non-blockingly. Returns its
// final state (ncclSuccess or an error), or ncclInProgress if the deadline passed first.
ncclResult_t poll_ready(ncclComm_t comm, const Deadline& deadline) {
  for (int polls = 0;; ++polls) {
    ncclResult_t state = ncclInProgress;
    ncclResult_t result = ncclCommGetAsyncError(comm, &state);
    if (result != ncclSuccess) return result;
    if (state != ncclInProgress) return state;
    if (deadline.passed()) return ncclInProgress;
    // Usually ready within microseconds; first-time connection setup can take much longer.
    if (polls < 1000) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

// What a call on a non-blocking communicator came to. Its return value alone does not say: NCCL
// 2.28.9's ncclCommSplit returns ncclSuccess while the split still runs as a job of the parent (its
// group end's ncclInProgress is passed over), and the parent's next call is then refused ("Attempt
// to use communicator before the previous operation returned ncclSuccess", invalid argument) —
// seen on an H200. So unless the call failed outright, ask ncclCommGetAsyncError until it settles.
ncclResult_t outcome(ncclComm_t comm, ncclResult_t returned, const Deadline& deadline) {
  if (returned != ncclSuccess && returned != ncclInProgress) return returned;
  return poll_ready(comm, deadline);
}

// A call that may legitimately answer "queued, still in progress" on a non-blocking communicator.
void check_queued(ncclResult_t result, const char* expr, const char* file, int line) {
  if (result != ncclInProgress) nccl_check(result, expr, file, line);
}
#define BRIGADE_NCCL_QUEUED(expr) check_queued((expr), #expr, __FILE__, __LINE__)

std::string nccl_error(ncclComm_t comm, ncclResult_t result) {
  std::string text = ncclGetErrorString(result);
  const char* detail = comm ? ncclGetLastError(comm) : nullptr;
  if (detail && *detail) text += std::string(": ") + detail;
  return text;
}

// The configuration of the communicator that carries only headers: 64-byte messages need no more
// than one thread block (so one channel) in all.
ncclConfig_t header_config() {
  ncclConfig_t config = nonblocking_config();
  config.minCTAs = 1;
  config.maxCTAs = 1;
  return config;
}

// Each brigade communicator is three NCCL communicators over the same ranks, each with a stream of
// its own (docs/comm.md), because NCCL runs a communicator's groups one after another and a send
// may wait until its receiver has posted the matching receive:
//  - kHeaders carries the headers (handshake.h) that tell a receiver what to allocate. A header
//    behind data on the same communicator would wait for that data — which may wait for a peer that
//    waits for this header.
//  - kUp carries data from a lower rank to a higher one (and the collectives), kDown the rest. An
//    exchange issues its sends before its host waits for any incoming header, and a receive that
//    needs a header after it: two groups (run_exchange). On one data communicator, two ranks that
//    send each other a message with a header would each queue the other's receive behind its own
//    send, which waits for that receive. Split by direction, the sends a rank issues early and the
//    receives it issues late from the same peer run on different streams.
enum Lane : size_t { kUp = 0, kDown = 1, kHeaders = 2, kLanes = 3 };
using NcclComms = std::array<ncclComm_t, kLanes>;

// The data communicator of a message from rank `from` to rank `to` (both ends compute it alike).
Lane data_lane(int from, int to) { return from < to ? kUp : kDown; }

// How errors name a lane's communicator: "" for the first, which names the whole.
std::string lane_suffix(size_t lane) {
  return lane == kUp ? "" : lane == kDown ? " (its downward data communicator)" : " (its header communicator)";
}

ncclConfig_t lane_config(size_t lane) { return lane == kHeaders ? header_config() : nonblocking_config(); }

void abort_all(NcclComms& comms) {
  for (ncclComm_t& comm : comms)
    if (comm != nullptr) ncclCommAbort(comm), comm = nullptr;
}

class NcclCommunicator final : public Communicator {
 public:
  // Takes ready communicators.
  NcclCommunicator(NcclComms comms, int rank, int size, Device device, Milliseconds timeout)
      : Communicator("nccl", rank, size, device, timeout), comms_(comms) {
    // Pinned memory for arriving headers, allocated once, here: allocating or freeing it later may
    // wait for the whole device (CUDA's implicit synchronisation), including an NCCL kernel that
    // waits for a peer which waits for this rank — a hang found on the emulator.
    try {
      for (Stream& stream : streams_) stream = Stream::create(device);
      BRIGADE_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&pinned_), kPinnedHeaders * sizeof(WireHeader)));
    } catch (...) {
      abort_all(comms_);  // ours now: nobody else would end them
      throw;
    }
    watchdog_ = std::thread([this] { watch(); });
  }

  ~NcclCommunicator() override {
    // Let queued transfers finish first, with the watchdog still enforcing their deadlines (it
    // aborts a stuck one, which ends the wait).
    bool drained = false;
    try {
      drained = wait_quietly(Deadline::after(timeout()));
    } catch (const std::exception& e) {
      std::cerr << "brigade: closing an nccl communicator: " << e.what() << "\n";
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    watchdog_.join();
    for (ncclComm_t& comm : comms_) {
      if (comm == nullptr) continue;
      // Finalize flushes NCCL's own pending work; if anything is stuck, abort instead.
      Deadline deadline = Deadline::after(timeout());
      ncclResult_t result = drained ? outcome(comm, ncclCommFinalize(comm), deadline) : ncclInternalError;
      if (result == ncclSuccess) ncclCommDestroy(comm);
      else ncclCommAbort(comm);
      comm = nullptr;
    }
    // Never free memory a GPU kernel may still touch: what did not finish is leaked on purpose.
    if (drained) in_flight_.clear();
    if (!in_flight_.empty()) new std::deque<InFlight>(std::move(in_flight_));
    if (pinned_ != nullptr) {
      const cudaError_t freed = cudaFreeHost(pinned_);
      if (freed != cudaSuccess)
        std::cerr << "brigade: closing an nccl communicator: cudaFreeHost: " << cudaGetErrorString(freed) << "\n";
    }
  }

 protected:
  // An exchange in two rounds, so that no send waits for a header. On entering it, the headers go
  // out (sent and received as one group, on their own communicator) and so does the early data:
  // every send, and the receives whose tensors are known. Once the incoming headers are in, the late
  // data: the receives that needed them. The host waits for nothing else, and never before its sends
  // are queued — as a gloo rank posts every send before waiting for any header. Issuing the data
  // only after the headers (the previous version) hung zb-v with one micro-batch: rank 0 held the token
  // ids it sent rank 1 until a header arrived that rank 1 sends only after reading those ids on the
  // host (the embedding's index check). check_exchanges_headers_first (pipeline/exchange_nccl.cpp)
  // models exactly these rounds.
  void run_exchange(std::vector<Transfer>& transfers, const Deadline& deadline) override {
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

  void run_all_reduce(const Tensor& t, ReduceOp op, const Deadline& deadline) override {
    current_stream(device()).wait(start_all_reduce(t, op, deadline, "all_reduce"));
  }

  bool overlaps_collectives() const override { return true; }

  // As run_all_reduce, but the caller's stream waits only when the returned function runs.
  std::function<void()> run_all_reduce_async(const Tensor& t, ReduceOp op, const Deadline& deadline) override {
    const Event done = start_all_reduce(t, op, deadline, "all_reduce_async");
    const Device d = device();
    return [done, d] { current_stream(d).wait(done); };
  }

  void run_broadcast(const Tensor& t, int root, const Deadline& deadline) override {
    cuda::DeviceGuard guard(device().index);
    std::string w = what("broadcast from rank " + std::to_string(root));
    follow_caller(kUp);
    enqueue(kUp, w, deadline, [&](ncclComm_t comm, cudaStream_t stream) {
      BRIGADE_NCCL_QUEUED(ncclBroadcast(t.raw_data(), t.raw_data(), size_t(t.numel()), nccl_dtype(t.dtype()), root,
                                        comm, stream));
    });
    finish(kUp, w, deadline, {t});
  }

  void run_barrier(const Deadline& deadline) override {
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
  void run_connect(const std::vector<Link>& links, const Deadline& deadline) override {
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

  std::unique_ptr<Communicator> run_split(int color, int key, const std::vector<int>& members,
                                          const Deadline& deadline) override {
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
          fail(w, ": the communicator was aborted");
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

  void abort_transport(const std::string&) override {
    // Also ends kernels waiting for peers, so the GPU (and whoever waits on it) is freed.
    std::lock_guard<std::mutex> lock(mutex_);
    abort_all(comms_);
  }

 private:
  struct InFlight {
    Event done;  // recorded after the transfer, on the stream it ran on (a lane's)
    Clock::time_point deadline;
    Milliseconds timeout;
    std::string what;
    std::vector<Tensor> keep;  // alive until the GPU is done with them (the allocator could reuse them)
  };

  cudaStream_t raw(size_t lane) const { return static_cast<cudaStream_t>(streams_[lane].raw()); }

  // The data lane of a transfer (data_lane).
  Lane lane_of(const Transfer& t) const {
    return t.op->kind == P2P::Kind::send ? data_lane(rank(), t.op->peer) : data_lane(t.op->peer, rank());
  }

  // Which transfers of an exchange go in its late round (run_exchange): a receive that needs a
  // header, and every receive after it from the same peer — NCCL pairs a link's messages by their
  // order, so they must not overtake it. A message to this very rank goes late, send and receive
  // alike: they must meet in one group.
  std::vector<bool> late_round(const std::vector<Transfer>& transfers) const {
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
  void enqueue_data(const std::string& w, const Deadline& deadline, std::vector<Transfer>& transfers,
                    const std::vector<bool>& late, bool late_round, std::array<std::vector<Tensor>, kLanes>& keep) {
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
  Event start_all_reduce(const Tensor& t, ReduceOp op, const Deadline& deadline, const std::string& name) {
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

  // The lane's stream waits for everything queued so far on the caller's stream.
  void follow_caller(size_t lane) {
    Event ready = Event::create(device());
    ready.record(current_stream(device()));
    streams_[lane].wait(ready);
  }

  // Runs the NCCL calls of one group on a lane: calls(comm, stream). Non-blocking: ncclGroupEnd may
  // answer "in progress", and the communicator is polled until the work is queued on the stream (not
  // finished: that is the watchdog's business).
  // The poll holds mutex_, so the watchdog and abort_transport wait for it. It stays: the lock keeps
  // an abort from freeing the handle mid-call. It is bounded by the deadline (outcome polls no
  // longer), but a group that sets links up at first use may poll that long (NCCL waits in it for
  // the peers' mirror setups), and so may an abort wait. To verify on a GPU (docs/comm.md).
  template <class Fn>
  void enqueue(size_t lane, const std::string& w, const Deadline& deadline, Fn&& calls) {
    ncclResult_t result;
    ncclComm_t comm = nullptr;
    std::string error;
    {
      std::lock_guard<std::mutex> lock(mutex_);  // abort must not free the communicators under our feet
      comm = comms_[lane];
      BRIGADE_CHECK(comm != nullptr, w, ": the communicator was aborted");
      BRIGADE_NCCL_CHECK(ncclGroupStart());
      try {
        calls(comm, raw(lane));
      } catch (...) {
        // Close the group (the error that matters is the one thrown), and on a non-blocking
        // communicator wait for NCCL's background job that the close may start: the caller may
        // abort or destroy the communicator next, which must not race that job.
        outcome(comm, ncclGroupEnd(), deadline);
        throw;
      }
      result = outcome(comm, ncclGroupEnd(), deadline);
      // Read NCCL's words while the handle is surely alive: the watchdog may abort it once we let go.
      if (result != ncclSuccess && result != ncclInProgress) error = nccl_error(comm, result);
    }
    if (result == ncclInProgress) fail_timeout(w, deadline, " while NCCL was queuing the transfer");
    if (result != ncclSuccess) {
      // A refused group leaves a non-blocking communicator with that asynchronous error (NCCL's group
      // cleanup), so it can do nothing more: abort it here, not whenever the watchdog looks next.
      abort(w + ": " + error);
      fail(w, ": ", error);
    }
  }

  // The watchdog follows what was queued on `stream` until it completes; `keep` stays alive until then.
  void follow(const std::string& w, const Deadline& deadline, const Stream& stream, std::vector<Tensor> keep) {
    Event done = Event::create(device());
    done.record(stream);
    std::lock_guard<std::mutex> lock(mutex_);
    in_flight_.push_back({done, deadline.at(), deadline.timeout(), w, std::move(keep)});
    wake_.notify_all();
  }

  // The caller's stream waits for the lane's; the watchdog follows the transfer until it completes.
  void finish(size_t lane, const std::string& w, const Deadline& deadline, std::vector<Tensor> keep) {
    Event done = Event::create(device());
    done.record(streams_[lane]);
    current_stream(device()).wait(done);
    follow(w, deadline, streams_[lane], std::move(keep));
  }

  // Blocks the host until `stream` is idle, up to the deadline.
  void wait_for_stream(const std::string& w, const Deadline& deadline, const Stream& stream) {
    Event idle = Event::create(device());
    idle.record(stream);
    while (!idle.query()) {
      BRIGADE_CHECK(!aborted(), w, ": the communicator was aborted while waiting for the GPU");
      if (deadline.passed()) fail_timeout(w, deadline);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    // ncclCommAbort ends NCCL's kernels, so an aborted communicator's stream goes idle too — with
    // whatever its receive buffers held: here, or at a peer (NCCL then reports an error).
    BRIGADE_CHECK(!aborted(), w, ": the communicator was aborted while waiting for the GPU");
    std::lock_guard<std::mutex> lock(mutex_);
    for (ncclComm_t comm : comms_) {
      ncclResult_t state = ncclSuccess;
      if (comm != nullptr && ncclCommGetAsyncError(comm, &state) == ncclSuccess)
        BRIGADE_CHECK(state == ncclSuccess || state == ncclInProgress, w, ": NCCL reported ", nccl_error(comm, state));
    }
  }

  // Until our streams are idle (true), or the communicator is aborted or `backstop` passes (false).
  bool wait_quietly(const Deadline& backstop) {
    for (const Stream& stream : streams_) {
      Event idle = Event::create(device());
      idle.record(stream);
      while (!idle.query()) {
        if (aborted() || backstop.passed()) return false;
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
    }
    return true;
  }

  // An exchange's headers in flight (post_headers, read_headers).
  struct HeaderRound {
    size_t arriving = 0;          // how many headers arrive
    std::vector<size_t> landing;  // per transfer, where its arriving header lands in pinned_
  };

  // Headers (handshake.h) must reach the host before their data can be received: they travel on a
  // communicator and stream of their own (kHeaders), through a small device buffer. Queues the
  // exchange's headers, sent and received as one group, and the copies of the arriving ones to
  // pinned memory; read_headers waits for them. Nothing here waits for the caller's stream or a
  // data stream, so a header is never queued behind data.
  HeaderRound post_headers(std::vector<Transfer>& transfers, const Deadline& deadline) {
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
  void read_headers(std::vector<Transfer>& transfers, const HeaderRound& round, const Deadline& deadline) {
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

  // The watchdog: retires finished transfers; aborts the communicator when any unfinished one is
  // past its deadline or NCCL reports an asynchronous error (a peer died, a network failed).
  void watch() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stopping_) {
      wake_.wait_for(lock, std::chrono::milliseconds(20));
      std::string problem;
      try {
        // Several streams feed the list, so a finished transfer may sit behind an unfinished one.
        in_flight_.erase(std::remove_if(in_flight_.begin(), in_flight_.end(),
                                        [](const InFlight& f) { return f.done.query(); }),
                         in_flight_.end());
        if (comms_[kUp] == nullptr) continue;  // aborted (all lanes at once): nothing more to watch
        auto late = std::find_if(in_flight_.begin(), in_flight_.end(),
                                 [](const InFlight& f) { return Clock::now() >= f.deadline; });
        if (late != in_flight_.end()) {
          problem = late->what + ": timed out after " + seconds_str(late->timeout) +
                    " (the transfer was still running on the GPU); the communicator is aborted";
        } else {
          for (ncclComm_t comm : comms_) {
            ncclResult_t state = ncclSuccess;
            ncclResult_t result = ncclCommGetAsyncError(comm, &state);
            if (result != ncclSuccess) state = result;
            if (state != ncclSuccess && state != ncclInProgress && problem.empty())
              problem = what("watchdog") + ": NCCL reported " + nccl_error(comm, state) +
                        "; the communicator is aborted";
          }
        }
      } catch (const std::exception& e) {
        problem = what("watchdog") + ": " + e.what();
      }
      if (problem.empty()) continue;
      lock.unlock();
      std::cerr << "brigade: " << problem << "\n";
      abort(problem);  // takes the lock itself
      lock.lock();
    }
  }

  NcclComms comms_;  // per Lane; all null once aborted
  // Per Lane: the data lanes' transfers are fenced against the caller's stream by events, the
  // header lane's against nothing.
  std::array<Stream, kLanes> streams_;
  static constexpr size_t kPinnedHeaders = 1024;  // header receives one exchange may hold
  WireHeader* pinned_ = nullptr;
  std::mutex mutex_;  // guards the communicators' lifetime against abort, and in_flight_
  std::condition_variable wake_;
  std::deque<InFlight> in_flight_;
  bool stopping_ = false;
  std::thread watchdog_;
};

std::atomic<int> communicators_created{0};

// Waits until a freshly initialised communicator is ready; aborts it and throws otherwise.
void settle(ncclComm_t comm, ncclResult_t result, const Deadline& deadline, const std::string& w) {
  if (comm == nullptr)  // nothing to poll, or to abort
    fail(w, ": ", result == ncclSuccess || result == ncclInProgress ? std::string("NCCL made no communicator")
                                                                    : nccl_error(nullptr, result));
  result = outcome(comm, result, deadline);
  if (result == ncclSuccess) return;
  std::string error = result == ncclInProgress ? "" : nccl_error(comm, result);
  ncclCommAbort(comm);  // not null: checked above
  if (result == ncclInProgress)
    throw TimeoutError(w + ": timed out after " + seconds_str(deadline.timeout()) + " (did every rank start?)");
  fail(w, ": ", error);
}

void check_devices(const std::vector<Device>& devices, const std::string& w) {
  for (Device d : devices) cuda::check_gpu(w.c_str(), d);
}

}  // namespace

bool nccl_available() { return true; }

int nccl_version() {
  int version = 0;
  BRIGADE_NCCL_CHECK(ncclGetVersion(&version));
  return version;
}

bool nccl_multi_rank_per_gpu() { return nccl_version() >= 23003; }

std::unique_ptr<Communicator> nccl_communicator(std::shared_ptr<Store> store, int rank, int size, Device device,
                                                Milliseconds timeout, std::optional<Milliseconds> connect_within) {
  std::string w =
      "comm nccl: creating rank " + std::to_string(rank) + " of " + std::to_string(size) + " on " + device.str();
  BRIGADE_CHECK(store != nullptr, w, ": a store is needed for the rendezvous");
  BRIGADE_CHECK(rank >= 0 && rank < size, w, ": the rank is outside the group");
  check_devices({device}, w);
  Deadline deadline = Deadline::after(connect_timeout(timeout, connect_within));
  // Every rank creates its communicators in the same order, so the n-th one agrees on its key.
  const std::string prefix = "nccl/" + std::to_string(communicators_created++);
  NcclComms comms{};
  cuda::DeviceGuard guard(device.index);
  try {
    for (size_t lane = 0; lane < kLanes; ++lane) {
      const char* const names[kLanes] = {"/unique_id", "/down_id", "/header_id"};
      const std::string key = prefix + names[lane];
      ncclUniqueId id;
      if (rank == 0) {
        BRIGADE_NCCL_CHECK(ncclGetUniqueId(&id));
        store->set(key, std::string(reinterpret_cast<const char*>(&id), sizeof id));
      } else {
        std::string bytes = store->get(key, deadline);
        BRIGADE_CHECK(bytes.size() == sizeof id, w, ": the unique id in ", store->str(), " has ", bytes.size(),
                      " bytes, expected ", sizeof id);
        std::memcpy(&id, bytes.data(), sizeof id);
      }
      ncclConfig_t config = lane_config(lane);
      ncclComm_t comm = nullptr;
      // Two statements: `comm` must be read after the call has written it (argument order is unspecified).
      ncclResult_t started = ncclCommInitRankConfig(&comm, size, id, rank, &config);
      settle(comm, started, deadline, w + lane_suffix(lane));  // aborts it on failure
      comms[lane] = comm;
    }
  } catch (...) {
    abort_all(comms);  // the ones made before the one that failed
    throw;
  }
  return std::make_unique<NcclCommunicator>(comms, rank, size, device, timeout);
}

std::vector<std::unique_ptr<Communicator>> nccl_group(const std::vector<Device>& devices, Milliseconds timeout) {
  std::string w = "comm nccl_group of " + std::to_string(devices.size()) + " ranks";
  BRIGADE_CHECK(!devices.empty(), w, ": at least one rank is needed");
  check_devices(devices, w);
  bool shared = false;
  for (size_t i = 0; i < devices.size(); ++i)
    for (size_t j = 0; j < i; ++j) shared = shared || devices[i] == devices[j];
  if (shared) {
    int version = nccl_version();
    BRIGADE_CHECK(version >= 23003, w, ": several ranks on one GPU need NCCL >= 2.30.3, the loaded library is ",
                  version / 10000, ".", version / 100 % 100, ".", version % 100);
    setenv("NCCL_MULTI_RANK_GPU_ENABLE", "1", 0);  // 0: a user's explicit setting wins
  }
  // Seen hanging on an H200 with three ranks on its one GPU; ranks on different GPUs of one process
  // wait for each other the same way, a device each (core/cuda/module_loading.h).
  BRIGADE_CHECK(devices.size() < 2 || cuda::module_loading() == cuda::ModuleLoading::eager, w,
                ": several NCCL ranks in one process need CUDA's eager module loading (CUDA_MODULE_LOADING=EAGER, set "
                "before CUDA starts; brigade's commands and GPU tests set it). With lazy loading, a rank's first launch "
                "of a kernel waits for its GPU to go idle while NCCL kernels there wait for that rank: a hang");
  // Creating the communicators is connecting, bounded like nccl_communicator's (never under 60 s),
  // not by the call timeout: a test that wants a hung receive aborted in 0.5 s must not also need
  // NCCL's initialisation of three communicators done in 0.5 s (on an H200 under load it was not).
  Deadline deadline = Deadline::after(connect_timeout(timeout));
  int n = int(devices.size());
  // Per rank, its communicators (NcclComms). Each lane is initialised as one group, so that
  // initialising rank 0 does not wait for rank 1 that this thread has not started yet.
  std::vector<NcclComms> comms(size_t(n), NcclComms{});
  auto abort_every = [&] {
    for (NcclComms& rank : comms) abort_all(rank);
  };
  try {
    for (size_t lane = 0; lane < kLanes; ++lane) {
      ncclUniqueId id;
      BRIGADE_NCCL_CHECK(ncclGetUniqueId(&id));
      ncclConfig_t config = lane_config(lane);
      std::vector<ncclResult_t> started(size_t(n), ncclSuccess);
      BRIGADE_NCCL_CHECK(ncclGroupStart());
      for (int r = 0; r < n; ++r) {
        cuda::DeviceGuard guard(devices[size_t(r)].index);
        started[size_t(r)] = ncclCommInitRankConfig(&comms[size_t(r)][lane], n, id, r, &config);
      }
      ncclResult_t ended = ncclGroupEnd();
      if (ended != ncclInProgress) BRIGADE_NCCL_CHECK(ended);
      for (int r = 0; r < n; ++r) {
        ncclComm_t comm = comms[size_t(r)][lane];
        comms[size_t(r)][lane] = nullptr;  // settle() aborts it on failure
        settle(comm, started[size_t(r)], deadline, w + ", rank " + std::to_string(r) + lane_suffix(lane));
        comms[size_t(r)][lane] = comm;
      }
    }
  } catch (...) {
    abort_every();
    throw;
  }
  std::vector<std::unique_ptr<Communicator>> result;
  try {
    for (int r = 0; r < n; ++r) {
      const NcclComms mine = comms[size_t(r)];
      comms[size_t(r)] = NcclComms{};  // the communicator owns them now
      result.push_back(std::make_unique<NcclCommunicator>(mine, r, n, devices[size_t(r)], timeout));
    }
  } catch (...) {
    abort_every();  // the ranks not yet handed over
    throw;
  }
  return result;
}

}  // namespace brigade::comm
